import { describeKey } from '../errors.js';
import { formatBytes } from '../units.js';
import type { ComputeTaskParams, DataAddress, TaskErrorInfo } from '../cluster/protocol.js';
import type { Counters } from './counters.js';
import type { ClientRecord } from './client-events.js';
import { MEMORY_HINT_CODE } from './errors.js';
import type { Outbox } from './outbox.js';
import type { Placement } from './placement.js';
import type { Retirements } from './retirement.js';
import type { Failure, TaskRecord, TaskTable } from './state.js';
import { type WorkerRecord, capacity } from './workers.js';

/** The records a task's moves read and change: the engine's. */
export interface TransitionsParts {
  readonly tasks: TaskTable;
  readonly workers: Map<string, WorkerRecord>;
  readonly clients: Map<string, ClientRecord>;
  readonly counters: Counters;
  readonly placement: Placement;
  readonly retirements: Retirements;
  readonly out: Outbox;
}

/**
 * The task-state machine's moves (docs/cluster.md#scheduler), shared by the engine's
 * events: each keeps the records consistent, and done() ends an event by filling free
 * slots and sending the batched releases.
 */
export class Transitions {
  readonly #tasks: TaskTable;
  readonly #workers: Map<string, WorkerRecord>;
  readonly #clients: Map<string, ClientRecord>;
  readonly #counters: Counters;
  readonly #placement: Placement;
  readonly #retirements: Retirements;
  readonly #out: Outbox;
  /** release-keys to send at the end of the current event, per worker. */
  readonly #releases = new Map<WorkerRecord, string[]>();

  constructor(parts: TransitionsParts) {
    this.#tasks = parts.tasks;
    this.#workers = parts.workers;
    this.#clients = parts.clients;
    this.#counters = parts.counters;
    this.#placement = parts.placement;
    this.#retirements = parts.retirements;
    this.#out = parts.out;
  }

  /** Forgets the releases batched for a worker that is gone. */
  dropReleases(worker: WorkerRecord): void {
    this.#releases.delete(worker);
  }


  /**
   * Re-examines keys whose need may have changed (iteratively, through their inputs):
   * forgets what nobody refers to, releases data and cancels work nobody needs, and
   * starts computing released keys that are needed again.
   */
  settle(start: Iterable<string>): void {
    const work = [...start];
    for (let key = work.pop(); key !== undefined; key = work.pop()) {
      const record = this.#tasks.get(key);
      if (record === undefined) continue;
      if (this.#tasks.forgettable(record)) {
        this.#tasks.forget(record);
        // Out of every client's progress too: pruned only by progress requests, the sets of
        // a client that never asks grew by every key it submitted, for as long as it stayed.
        for (const client of this.#clients.values()) client.tasks.delete(key);
        work.push(...record.deps);
      } else if (this.#tasks.needed(record)) {
        if (record.state === 'released') this.#activate(record, work);
      } else if (record.state === 'memory') {
        this.dropData(record);
        this.#tasks.setState(record, 'released');
        work.push(record.key);
      } else if (record.state === 'waiting' || record.state === 'ready' || record.state === 'processing') {
        if (record.state === 'processing') this.unassign(record, true);
        this.#tasks.setState(record, 'released');
        work.push(...record.deps, record.key);
      }
    }
  }

  /** A released key is needed: compute it (after its inputs, which may need computing too). */
  #activate(record: TaskRecord, work: string[]): void {
    const failed = record.deps.map((dep) => this.#tasks.get(dep)).find((dep) => dep?.state === 'erred');
    if (failed?.failure !== undefined) {
      this.fail(record, failed.failure);
      return;
    }
    // Refused before its inputs are computed for nothing.
    if (this.#tooLarge(record)) return this.fail(record, { failedKey: record.key, error: this.#memoryHintError(record) });
    if (record.computed) this.#counters.tasksRecomputed++;
    this.#tasks.setState(record, 'waiting');
    for (const dep of record.deps) {
      if (this.#tasks.get(dep)?.state === 'memory') continue;
      record.waitingOn.add(dep);
      work.push(dep);
    }
    if (record.waitingOn.size === 0) this.makeReady(record);
  }

  /** A task that was running (or about to) must be placed again: ready, or waiting for lost inputs. */
  reassess(record: TaskRecord): void {
    const inputs = record.deps.map((dep) => this.#tasks.get(dep) as TaskRecord);
    const failed = inputs.find((dep) => dep.state === 'erred');
    if (failed?.failure !== undefined) return this.fail(record, failed.failure);
    const missing = inputs.filter((dep) => dep.state !== 'memory');
    if (missing.length === 0) return this.makeReady(record);
    this.#tasks.setState(record, 'waiting');
    for (const dep of missing) record.waitingOn.add(dep.key);
    this.settle(missing.map((dep) => dep.key));
  }

  makeReady(record: TaskRecord): void {
    if (this.#tooLarge(record)) return this.fail(record, { failedKey: record.key, error: this.#memoryHintError(record) });
    this.#tasks.setState(record, 'ready');
    this.#placement.enqueue(record);
  }

  /** Its memory hint is more than any open worker's memory limit (with no open worker, the no-workers timeout decides). */
  #tooLarge(record: TaskRecord): boolean {
    if (record.memory === 0) return false;
    let open = false;
    for (const worker of this.#workers.values()) {
      if (worker.closing) continue;
      if (worker.memoryLimit >= record.memory) return false;
      open = true;
    }
    return open;
  }

  /** Ready tasks with memory hints that no worker left could take fail now rather than wait forever. */
  failUnplaceable(): void {
    for (const record of [...this.#placement.hinted()]) {
      if (record.state === 'ready' && this.#tooLarge(record)) this.fail(record, { failedKey: record.key, error: this.#memoryHintError(record) });
    }
  }

  #memoryHintError(record: TaskRecord): TaskErrorInfo {
    let largest = 0;
    for (const worker of this.#workers.values()) if (!worker.closing) largest = Math.max(largest, worker.memoryLimit);
    return {
      name: 'MemoryHintError',
      message: `task ${describeKey(record.key)} asks for ${formatBytes(record.memory)} of memory (its memory hint), more than any connected worker has (the largest memory limit is ${formatBytes(largest)})`,
      code: MEMORY_HINT_CODE,
    };
  }

  /** A key's last copy is gone. Tasks waiting for it wait again; it is recomputed if needed. */
  lose(record: TaskRecord): void {
    this.#tasks.setState(record, 'released');
    for (const key of record.dependents) {
      const dependent = this.#tasks.get(key);
      if (dependent?.state === 'ready') this.#tasks.setState(dependent, 'waiting');
      if (dependent?.state === 'waiting') dependent.waitingOn.add(record.key);
    }
    this.settle([record.key]);
  }

  /** A task failed: it and every task waiting on it are erred; clients wanting them are told. */
  fail(first: TaskRecord, failure: Failure): void {
    const stack = [first];
    const inputs: string[] = [];
    for (let record = stack.pop(); record !== undefined; record = stack.pop()) {
      if (record.state === 'erred' || record.state === 'memory') continue;
      if (record.state === 'processing') this.unassign(record, record !== first);
      record.failure = failure;
      this.#tasks.setState(record, 'erred');
      inputs.push(...record.deps);
      for (const client of record.wantedBy) this.#out.keyErred(client, { key: record.key, ...failure });
      for (const key of record.dependents) {
        const dependent = this.#tasks.get(key);
        if (dependent?.state === 'waiting') stack.push(dependent);
      }
    }
    this.settle([first.key, ...inputs]);
  }

  unassign(record: TaskRecord, cancel: boolean): void {
    const worker = record.worker === undefined ? undefined : this.#workers.get(record.worker);
    if (worker !== undefined) {
      worker.processing.delete(record.key);
      if (cancel) this.#out.cancelTask(worker, record.key);
    }
    record.worker = undefined;
  }

  addHolder(record: TaskRecord, worker: WorkerRecord): void {
    if (record.holders.has(worker.id)) return;
    record.holders.add(worker.id);
    worker.has.add(record.key);
    worker.nbytes += record.size;
  }

  dropData(record: TaskRecord): void {
    for (const id of record.holders) {
      const worker = this.#workers.get(id);
      if (worker === undefined) continue;
      worker.has.delete(record.key);
      worker.nbytes -= record.size;
      this.release(worker, record.key);
    }
    record.holders.clear();
  }

  release(worker: WorkerRecord, key: string): void {
    const keys = this.#releases.get(worker);
    if (keys === undefined) this.#releases.set(worker, [key]);
    else keys.push(key);
  }

  addresses(record: TaskRecord): DataAddress[] {
    const out: DataAddress[] = [];
    for (const id of record.holders) {
      const worker = this.#workers.get(id);
      if (worker !== undefined) out.push(worker.data);
    }
    return out;
  }

  /**
   * End of an event: fill free slots, then send the batched releases. Every worker takes
   * from its own queue and the shared one before any steals: a worker only steals from one
   * that cannot start the task itself, and a thief looking before its victim had refilled
   * would see a free slot there and stay idle (a worker that registered first could take
   * nothing from the holder of a shuffle's inputs for a whole run).
   */
  done(): void {
    for (const steal of [false, true]) {
      for (const worker of this.#workers.values()) {
        if (worker.closing) continue;
        while (worker.processing.size < capacity(worker)) {
          const record = this.#placement.next(worker, steal);
          if (record === undefined) break;
          this.#send(worker, record);
        }
      }
    }
    this.#retirements.step();
    for (const [worker, keys] of this.#releases) if (this.#workers.get(worker.id) === worker) this.#out.releaseKeys(worker, keys);
    this.#releases.clear();
  }

  #send(worker: WorkerRecord, record: TaskRecord): void {
    const deps: Record<string, DataAddress[]> = {};
    for (const dep of record.deps) deps[dep] = this.addresses(this.#tasks.get(dep) as TaskRecord);
    this.#tasks.setState(record, 'processing');
    record.worker = worker.id;
    record.startedOn = undefined;
    worker.processing.add(record.key);
    const params: ComputeTaskParams = { key: record.key, spec: record.spec, deps, priority: record.priority };
    if (this.#followed(record)) params.followed = true;
    const consumes = this.#readLast(record);
    if (consumes.length > 0) params.consumes = consumes;
    this.#out.computeTask(worker, params);
  }

  /** The inputs no other pending task needs and no client wants: this task reads them last. */
  #readLast(record: TaskRecord): string[] {
    const out: string[] = [];
    for (const key of record.deps) {
      const dep = this.#tasks.get(key);
      if (dep !== undefined && dep.wantedBy.size === 0 && dep.pendingDependents === 1) out.push(key);
    }
    return out;
  }

  /** Some dependent waits for this task alone: it becomes ready when this one finishes. */
  #followed(record: TaskRecord): boolean {
    for (const key of record.dependents) {
      const dependent = this.#tasks.get(key);
      if (dependent?.state === 'waiting' && dependent.waitingOn.size === 1 && dependent.waitingOn.has(record.key)) return true;
    }
    return false;
  }
}
