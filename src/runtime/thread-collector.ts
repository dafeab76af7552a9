/**
 * When a task thread collects the garbage its tasks leave: the copies of their inputs
 * (moved or cloned into the thread) die with each task, and V8 sizes the thread's
 * collections by its few-MiB heap, not by those buffers.
 *
 * Once the thread has been idle for `idleMs` after a task with large inputs (the worker
 * had nothing ready for it: a free moment), it runs a full collection, so an idle thread
 * does not sit on the last tasks' copies. Not after every task: a full collection costs
 * the thread milliseconds, several times a short task's own time; while tasks keep
 * coming, V8's own collections, which count the copies as external memory, keep up. A
 * task that starts cancels the idle collection; what is owed carries over.
 *
 * This needs the thread's event loop to run between tasks (executor.ts, piscina's
 * `atomics: 'disabled'`): parked in `Atomics.wait`, a thread ran neither this timer nor
 * V8's own tasks for its heap.
 */
export interface ThreadCollectorOptions {
  /** Runs a full collection. */
  collect: () => void;
  /** Idle time (ms) after a task before the thread collects. Default 20. */
  idleMs?: number;
  /** Tasks with less binary input than this leave nothing worth collecting. Default 1 MiB. */
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

  /** Input bytes of the tasks since the last collection. */
  get owedBytes(): number {
    return this.#owedBytes;
  }

  /** A task starts: no idle collection under it. */
  taskStarted(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** A task whose inputs held `inputBytes` of binary data ended (its answer is on its way). */
  taskEnded(inputBytes: number): void {
    if (inputBytes >= this.#minInputBytes) this.#owedBytes += inputBytes;
    if (this.#owedBytes === 0 || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#owedBytes = 0;
      this.#collect();
    }, this.#idleMs);
  }
}
