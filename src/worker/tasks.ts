import type { SpillStore } from '../store/spill-store.js';
import { type QueuedTask, TaskQueue } from './queue.js';

/**
 * The tasks a worker holds: queued (waiting for inputs or a thread) and running, and the
 * fetched copies of inputs that only they read.
 */
export class WorkerTasks {
  readonly queue = new TaskQueue();
  readonly running = new Map<string, QueuedTask>();
  readonly #store: SpillStore;
  /** Keys held only as copies fetched from peers (the scheduler does not know of them). */
  readonly #replicas: Set<string>;

  constructor(store: SpillStore, replicas: Set<string>) {
    this.#store = store;
    this.#replicas = replicas;
  }

  /** Removes a queued task that will not run here, and the copies only it read. */
  dequeue(task: QueuedTask): void {
    this.queue.delete(task.key);
    this.dropReplicas(task.inputs);
  }

  /** Empties the queue (tasks not started), returning them. */
  takeQueued(): QueuedTask[] {
    const tasks = [...this.queue.values()];
    for (const task of tasks) this.dequeue(task);
    return tasks;
  }

  /**
   * Deletes fetched copies no queued or running task still reads. The scheduler never
   * learned of them, so it would never release them: keeping them would fill the store.
   */
  dropReplicas(keys: readonly string[]): void {
    const replicas = this.#replicas;
    const candidates = keys.filter((key) => replicas.has(key));
    if (candidates.length === 0) return;
    const needed = new Set<string>();
    for (const task of [...this.queue.values(), ...this.running.values()]) for (const key of task.inputs) needed.add(key);
    for (const key of candidates) {
      if (needed.has(key)) continue;
      replicas.delete(key);
      this.#store.delete(key);
    }
  }
}
