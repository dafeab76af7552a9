import { SpillwayError, describeKey } from '../errors.js';
import type { TaskErrorInfo, TaskSpec } from '../cluster/protocol.js';
import { memoryHint } from './graph.js';

/**
 * A key's state at the scheduler (docs/cluster.md#task-states):
 * - `released`: no data anywhere; the spec is kept because a dependent may need it recomputed;
 * - `waiting`: needed, some input is not in memory yet;
 * - `ready`: every input is in memory; queued for placement;
 * - `processing`: sent to a worker;
 * - `memory`: held by at least one worker;
 * - `erred`: its task (or an input's) failed.
 */
export type TaskState = 'released' | 'waiting' | 'ready' | 'processing' | 'memory' | 'erred';
export const TASK_STATES: readonly TaskState[] = ['released', 'waiting', 'ready', 'processing', 'memory', 'erred'];

export interface Failure {
  failedKey: string;
  error: TaskErrorInfo;
}

export interface TaskRecord {
  readonly key: string;
  readonly spec: TaskSpec;
  readonly deps: readonly string[];
  /** Known tasks whose spec refers to this key. */
  readonly dependents: Set<string>;
  state: TaskState;
  /** Lower runs first (global submission order, dependencies before dependents). */
  readonly priority: number;
  /** While waiting: the inputs not in memory. */
  readonly waitingOn: Set<string>;
  /** Dependents that are waiting, ready or processing: while > 0 the data must stay. */
  pendingDependents: number;
  /** Clients that asked for this key. */
  readonly wantedBy: Set<string>;
  /** While processing: the worker running it. */
  worker: string | undefined;
  /** While ready: the placement queue it sits in (a worker id, or '' for the shared one). */
  queue: string | undefined;
  /** While in memory: the workers holding it. */
  readonly holders: Set<string>;
  size: number;
  where: string;
  failure: Failure | undefined;
  /** It reached memory once: computing it again counts as a recomputation. */
  computed: boolean;
  /** The worker that reported starting it (task-started), while processing there. */
  startedOn: string | undefined;
  /** Workers that died while running it (poison-task accounting). */
  deaths: number;
  /** Reruns left after its function throws (`retries` of its spec). */
  retriesLeft: number;
  /** Bytes its spec's memory hint asks for while it runs (0: no hint). */
  readonly memory: number;
}

export function isPending(state: TaskState): boolean {
  return state === 'waiting' || state === 'ready' || state === 'processing';
}

/**
 * Every task the scheduler knows, with the per-state counts and the pending-dependent
 * counters kept exact by `setState` (the only way a state changes).
 */
export class TaskTable {
  readonly #tasks = new Map<string, TaskRecord>();
  readonly #counts = new Map<TaskState, number>(TASK_STATES.map((s) => [s, 0]));
  /** Called when a ready task leaves the ready state (its queue slot becomes stale). */
  onLeaveReady: (record: TaskRecord) => void = () => undefined;
  /** Called when a task is forgotten. */
  onForget: (record: TaskRecord) => void = () => undefined;

  get size(): number {
    return this.#tasks.size;
  }

  get(key: string): TaskRecord | undefined {
    return this.#tasks.get(key);
  }

  has(key: string): boolean {
    return this.#tasks.has(key);
  }

  values(): IterableIterator<TaskRecord> {
    return this.#tasks.values();
  }

  count(state: TaskState): number {
    return this.#counts.get(state) ?? 0;
  }

  counts(): Record<TaskState, number> {
    return Object.fromEntries(TASK_STATES.map((s) => [s, this.count(s)])) as Record<TaskState, number>;
  }

  /** Adds a task in the released state. Its dependencies must be known already. */
  add(key: string, spec: TaskSpec, deps: readonly string[], priority: number): TaskRecord {
    const record: TaskRecord = {
      key,
      spec,
      deps,
      dependents: new Set(),
      state: 'released',
      priority,
      waitingOn: new Set(),
      pendingDependents: 0,
      wantedBy: new Set(),
      worker: undefined,
      queue: undefined,
      holders: new Set(),
      size: 0,
      where: '',
      failure: undefined,
      computed: false,
      startedOn: undefined,
      deaths: 0,
      retriesLeft: spec.retries ?? 0,
      memory: memoryHint(spec.memory) ?? 0,
    };
    for (const dep of deps) this.#require(dep).dependents.add(key);
    this.#tasks.set(key, record);
    this.#counts.set('released', this.count('released') + 1);
    return record;
  }

  setState(record: TaskRecord, state: TaskState): void {
    const old = record.state;
    if (old === state) return;
    if (old === 'ready') {
      this.onLeaveReady(record);
      record.queue = undefined;
    }
    if (old === 'waiting') record.waitingOn.clear();
    const delta = Number(isPending(state)) - Number(isPending(old));
    if (delta !== 0) for (const dep of record.deps) this.#require(dep).pendingDependents += delta;
    record.state = state;
    this.#counts.set(old, this.count(old) - 1);
    this.#counts.set(state, this.count(state) + 1);
  }

  /** Needed: wanted by a client, or an input of a task still to run. */
  needed(record: TaskRecord): boolean {
    return record.wantedBy.size > 0 || record.pendingDependents > 0;
  }

  /** Can be dropped entirely: no data, nobody wants it, no known task refers to it. */
  forgettable(record: TaskRecord): boolean {
    return (record.state === 'released' || record.state === 'erred') && record.wantedBy.size === 0 && record.dependents.size === 0;
  }

  forget(record: TaskRecord): void {
    if (!this.forgettable(record)) throw new SpillwayError('SPW_ERR_INTERNAL', `scheduler bug: forgetting ${describeKey(record.key)} in state ${record.state}`);
    for (const dep of record.deps) this.#tasks.get(dep)?.dependents.delete(record.key);
    this.#tasks.delete(record.key);
    this.#counts.set(record.state, this.count(record.state) - 1);
    this.onForget(record);
  }

  #require(key: string): TaskRecord {
    const record = this.#tasks.get(key);
    if (record === undefined) throw new SpillwayError('SPW_ERR_INTERNAL', `scheduler bug: unknown dependency ${describeKey(key)}`);
    return record;
  }
}
