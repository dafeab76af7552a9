import type { ComputeTaskParams } from '../cluster/protocol.js';
import { dependencies } from '../cluster/protocol.js';

/** The part of the store the queue looks at. */
export interface Locality {
  has(key: string): boolean;
  where(key: string): string | undefined;
}

export interface QueuedTask extends ComputeTaskParams {
  /** Keys the task reads, in order. */
  inputs: string[];
  /** Arrival order: the last tie-breaker. */
  seq: number;
  /** Its remote inputs are being fetched. */
  fetching: boolean;
  /** Seconds spent fetching inputs from peers so far. */
  fetchSeconds: number;
  /** Its spilled inputs were already read ahead once. */
  prefetched?: boolean;
}

/**
 * The compute-task messages not yet started. Among tasks whose inputs are all local, the
 * next to run is one whose inputs are all in memory (no read before it can start, and it
 * lets spilled data stay spilled), then the lowest priority, then the oldest. A scan per
 * pick: the queue holds the tasks placed on one worker, hundreds to a few thousands.
 */
export class TaskQueue {
  readonly #tasks = new Map<string, QueuedTask>();
  #seq = 0;

  get size(): number {
    return this.#tasks.size;
  }

  has(key: string): boolean {
    return this.#tasks.has(key);
  }

  get(key: string): QueuedTask | undefined {
    return this.#tasks.get(key);
  }

  /** Adds a task; a second compute-task for a queued key replaces the first. */
  add(params: ComputeTaskParams): QueuedTask {
    const task: QueuedTask = { ...params, inputs: dependencies(params.spec), seq: this.#seq++, fetching: false, fetchSeconds: 0 };
    this.#tasks.set(task.key, task);
    return task;
  }

  delete(key: string): boolean {
    return this.#tasks.delete(key);
  }

  values(): IterableIterator<QueuedTask> {
    return this.#tasks.values();
  }

  /** Up to `count` runnable tasks (all inputs local), best first. */
  ready(store: Locality, count: number): QueuedTask[] {
    const scored: { task: QueuedTask; spilled: number }[] = [];
    for (const task of this.#tasks.values()) {
      if (task.fetching || !task.inputs.every((key) => store.has(key))) continue;
      scored.push({ task, spilled: task.inputs.filter((key) => store.where(key) !== 'memory').length });
    }
    scored.sort((a, b) => (a.spilled > 0 ? 1 : 0) - (b.spilled > 0 ? 1 : 0) || compare(a.task, b.task));
    return scored.slice(0, count).map((s) => s.task);
  }

  /**
   * Tasks waiting for inputs held elsewhere (and not being fetched), best first. An input
   * that a task queued or running here will produce (`producing`) is waited for, not fetched.
   */
  needingFetch(store: Locality, producing: (key: string) => boolean): QueuedTask[] {
    const found: QueuedTask[] = [];
    for (const task of this.#tasks.values()) {
      if (task.fetching) continue;
      if (task.inputs.some((key) => !store.has(key) && !this.#tasks.has(key) && !producing(key))) found.push(task);
    }
    return found.sort(compare);
  }
}

function compare(a: QueuedTask, b: QueuedTask): number {
  return a.priority - b.priority || a.seq - b.seq;
}
