import type { DataAddress } from '../cluster/protocol.js';
import { FollowerHold } from './follower-hold.js';
import type { QueuedTask } from './queue.js';
import { toErrorInfo } from './task-reports.js';
import { type Pump, TaskRunner, type TaskRunnerParts } from './task-runner.js';

/** Longest a thread waits for the dependent of a followed result: a scheduler round trip, with room for a loaded host. */
const FOLLOWER_HOLD_MS = 250;

/** How far ahead the pump works. */
export interface TaskPumpLimits {
  /** Fetches of remote inputs in flight at once. */
  readonly fetchConcurrency: number;
  /** Ready tasks whose spilled inputs are read back ahead (0: none). */
  readonly prefetch: number;
}

/**
 * Starts what can start, each time something changes: queued tasks onto free threads (up
 * to nthreads), reads of spilled inputs ahead, fetches of remote inputs.
 */
export class TaskPump implements Pump {
  /** A thread kept free for the dependent of a result just reported (follower-hold.ts). */
  readonly hold: FollowerHold;
  readonly runner: TaskRunner;
  readonly #parts: TaskRunnerParts;
  readonly #limits: TaskPumpLimits;
  readonly #nthreads: number;
  readonly #prefetching = new Set<string>();
  #fetches = 0;

  constructor(parts: TaskRunnerParts, nthreads: number, limits: TaskPumpLimits) {
    this.#parts = parts;
    this.#nthreads = nthreads;
    this.#limits = limits;
    this.hold = new FollowerHold(FOLLOWER_HOLD_MS, () => this.pump());
    this.runner = new TaskRunner(parts, this.hold, this);
  }

  pump(): void {
    const { store, tasks, life } = this.#parts;
    if (life.closed || store.paused) return; // 'resume' pumps again
    while (tasks.running.size < this.#nthreads) {
      if (this.hold.holding(tasks.queue)) break;
      const [next] = tasks.queue.ready(store, 1);
      if (next === undefined) break;
      tasks.queue.delete(next.key);
      void this.runner.run(next);
    }
    this.#prefetch();
    while (this.#fetches < this.#limits.fetchConcurrency) {
      const [task] = tasks.queue.needingFetch(store, (key) => tasks.running.has(key));
      if (task === undefined) break;
      void this.#fetchFor(task);
    }
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
