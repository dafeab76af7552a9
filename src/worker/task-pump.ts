import type { DataAddress, FunctionRef } from '../cluster/protocol.js';
import { ShuffleFunctions, isShuffleFunction } from '../shuffle/protocol.js';
import { FollowerHold, storePins } from './follower-hold.js';
import type { QueuedTask } from './queue.js';
import { toErrorInfo } from './task-reports.js';
import { type Pump, TaskRunner, type TaskRunnerParts } from './task-runner.js';
import { ThreadSlots } from './thread-slots.js';

/** Longest a thread waits for the dependent of a followed result: a scheduler round trip, with room for a loaded host. */
const FOLLOWER_HOLD_MS = 250;

/**
 * Tasks that may run beyond the threads, per thread (thread-slots.ts): one pushing or reading
 * while another runs on the thread keeps the thread busy, and each holds memory.
 */
const EXTRA_PER_THREAD = 1;

/** How far ahead the pump works. */
export interface TaskPumpLimits {
  /** Fetches of remote inputs in flight at once. */
  readonly fetchConcurrency: number;
  /** Ready tasks whose spilled inputs are read back ahead (0: none). */
  readonly prefetch: number;
}

/**
 * Starts what can start, each time something changes: queued tasks onto free threads (up
 * to nthreads; shuffle tasks, which take a thread only for their thread work, up to a few
 * more: thread-slots.ts), reads of spilled inputs ahead, fetches of remote inputs.
 */
export class TaskPump implements Pump {
  /** A thread kept free for the dependent of a result just reported (follower-hold.ts). */
  readonly hold: FollowerHold;
  readonly runner: TaskRunner;
  readonly #parts: TaskRunnerParts;
  readonly #limits: TaskPumpLimits;
  readonly #slots: ThreadSlots;
  readonly #prefetching = new Set<string>();
  #fetches = 0;

  constructor(parts: TaskRunnerParts, nthreads: number, limits: TaskPumpLimits) {
    this.#parts = parts;
    this.#slots = new ThreadSlots(nthreads, EXTRA_PER_THREAD * nthreads, () => this.pump());
    this.#limits = limits;
    this.hold = new FollowerHold(FOLLOWER_HOLD_MS, () => this.pump(), storePins(parts.store));
    this.runner = new TaskRunner(parts, this.hold, this);
  }

  pump(): void {
    const { store, tasks, life } = this.#parts;
    // Tasks waiting for a slot are running: on close they go on, to fail and end.
    if (life.closed) return this.#slots.serveWaiting();
    const hold = this.hold.check(tasks.queue);
    if (hold !== 'holding') {
      // The reader of a result just reported first, then tasks back for their thread work, then the queue.
      if (typeof hold === 'object' && !store.paused) this.#startReader(hold);
      this.#slots.serveWaiting();
    }
    if (store.paused) return; // 'resume' pumps again
    if (hold !== 'holding') this.#start();
    this.#prefetch();
    while (this.#fetches < this.#limits.fetchConcurrency) {
      const [task] = tasks.queue.needingFetch(store, (key) => tasks.running.has(key));
      if (task === undefined) break;
      void this.#fetchFor(task);
    }
  }

  /** Starts the task that reads the result of a hold, if it can start now. */
  #startReader(task: QueuedTask): void {
    const { store, tasks } = this.#parts;
    if (task.fetching || !task.inputs.every((key) => store.has(key))) return;
    const withSlot = startsWithSlot(task.spec.fn, this.#slots.free);
    if (!this.#canStart(withSlot)) return;
    tasks.queue.delete(task.key);
    void this.runner.run(task, this.#slots.start(withSlot));
  }

  /** Starts queued tasks that are ready, while threads (thread-slots.ts) allow. */
  #start(): void {
    const { store, tasks } = this.#parts;
    const slots = this.#slots;
    while (slots.canStart(tasks.running.size, false)) {
      const [next] = tasks.queue.ready(store, 1);
      if (next === undefined) return;
      const withSlot = startsWithSlot(next.spec.fn, slots.free);
      if (!this.#canStart(withSlot)) return;
      tasks.queue.delete(next.key);
      void this.runner.run(next, slots.start(withSlot));
    }
  }

  /**
   * A task starting without a slot runs beside the threads' work and holds memory meanwhile:
   * over target (RSS too) there is no room for it, as for a read ahead.
   */
  #canStart(withSlot: boolean): boolean {
    const { store, tasks } = this.#parts;
    return this.#slots.canStart(tasks.running.size, withSlot) && (withSlot || !store.isProcessAboveTarget());
  }

  /** Reads back the spilled inputs of the next ready tasks while the threads are busy (one read per key, shared with acquire). */
  #prefetch(): void {
    const { store, tasks } = this.#parts;
    // Over target (RSS too: reading ahead into a worker whose RSS is high adds to every
    // task's peak) there is no room for values not needed yet.
    if (this.#limits.prefetch === 0 || store.isProcessAboveTarget()) return;
    for (const task of tasks.queue.ready(store, this.#limits.prefetch)) {
      // Once per task: a read-ahead can push another value out (memory near target), and
      // reading that one back would push this one out again, forever.
      if (task.prefetched === true) continue;
      task.prefetched = true;
      for (const key of task.inputs) {
        if (store.where(key) === 'memory' || this.#prefetching.has(key)) continue;
        this.#prefetching.add(key);
        store
          .get(key)
          .catch(() => undefined) // the task's own acquire reports a real failure
          .finally(() => {
            this.#prefetching.delete(key);
            // Next turn, not next microtask: a value found through its weak reference
            // resolves at once, and a microtask loop would starve sockets and timers.
            setImmediate(() => this.pump());
          });
      }
    }
  }

  async #fetchFor(task: QueuedTask): Promise<void> {
    const { tasks, fetcher, reports, life } = this.#parts;
    task.fetching = true;
    this.#fetches++;
    const started = performance.now();
    let missing: Map<string, DataAddress[]>;
    try {
      // Inputs that a task here will produce are waited for, not fetched.
      const remote = task.inputs.filter((key) => !tasks.queue.has(key) && !tasks.running.has(key));
      missing = await fetcher.ensure(remote, task.deps);
    } catch (err) {
      if (life.closed) return;
      missing = new Map();
      if (tasks.queue.get(task.key) === task) {
        tasks.queue.delete(task.key);
        reports.erred(task.key, toErrorInfo(err));
      }
    } finally {
      this.#fetches--;
      task.fetching = false;
      task.fetchSeconds += (performance.now() - started) / 1000;
    }
    if (tasks.queue.get(task.key) !== task) {
      tasks.dropReplicas(task.inputs); // cancelled while fetching
    } else if (missing.size > 0) {
      // Dropped: the scheduler corrects its records and sends the task again.
      tasks.queue.delete(task.key);
      for (const [key, holders] of missing) reports.missing(task.key, key, holders);
      tasks.dropReplicas(task.inputs);
    }
    this.pump();
  }
}

/**
 * Whether a task starts holding a thread slot. Most tasks hold one from start to end. A
 * shuffle transfer (split, then push) or unpack (read chunks back, then assemble) takes a
 * free one at once too, and else starts without one and waits for one when it needs a thread.
 */
function startsWithSlot(fn: FunctionRef, free: boolean): boolean {
  const later = isShuffleFunction(fn) && (fn.name === ShuffleFunctions.transfer || fn.name === ShuffleFunctions.unpack);
  return !later || free;
}
