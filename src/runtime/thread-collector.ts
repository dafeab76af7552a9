/**
 * When a task thread collects the garbage its tasks leave that it could not free itself
 * (worker/thread.ts frees the large copies of their inputs at once): small copies, the
 * user's own intermediate values. V8 sizes the thread's collections by its few-MiB heap,
 * not by the buffers outside it.
 *
 * Once the thread has been idle for `idleMs` after tasks that left at least
 * `minInputBytes` of such garbage between them (the worker had nothing ready for it: a
 * free moment), it runs a full collection, so an idle thread does not sit on the last
 * tasks' garbage. Not after every task: a full collection costs
 * the thread milliseconds, several times a short task's own time; while tasks keep
 * coming, V8's own collections, which count the copies as external memory, keep up. A
 * task that starts cancels the idle collection; what is owed carries over.
 *
 * This needs the thread's event loop to run between tasks (executor.ts, piscina's
 * `atomics: 'disabled'`): parked in `Atomics.wait`, a thread would run neither this timer
 * nor V8's own tasks for its heap.
 */
export interface ThreadCollectorOptions {
  /** Runs a full collection. */
  collect: () => void;
  /** Idle time (ms) after a task before the thread collects. Default 20. */
  idleMs?: number;
  /** Less garbage than this, summed over the tasks since the last collection, is not worth collecting. Default 1 MiB. */
  minInputBytes?: number;
}

export class ThreadCollector {
  readonly #collect: () => void;
  readonly #idleMs: number;
  readonly #minInputBytes: number;
  #owedBytes = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: ThreadCollectorOptions) {
    this.#collect = options.collect;
    this.#idleMs = options.idleMs ?? 20;
    this.#minInputBytes = options.minInputBytes ?? 1024 * 1024;
  }

  /** Garbage bytes the tasks since the last collection left. */
  get owedBytes(): number {
    return this.#owedBytes;
  }

  /** A task starts: no idle collection under it. */
  taskStarted(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** A task that left `garbageBytes` of binary garbage behind ended (its answer is on its way). */
  taskEnded(garbageBytes: number): void {
    if (garbageBytes > 0) this.#owedBytes += garbageBytes;
    if (this.#owedBytes < this.#minInputBytes || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#owedBytes = 0;
      this.#collect();
    }, this.#idleMs);
  }
}
