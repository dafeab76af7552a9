/**
 * Keeps a thread free for a moment after a task whose result one dependent alone waits
 * for (the scheduler marks such tasks `followed`): that dependent is sent as soon as the
 * result is reported. Starting another task meanwhile would make room for it by spilling
 * the values least recently used, the fresh result first when nothing else is left, and
 * the dependent would read it back from disk: a shuffle's inputs and outputs written once
 * more each. The hold ends when a queued task reads the result, or after `maxMs`.
 */
export interface HoldQueue<T extends { inputs: readonly string[] } = { inputs: readonly string[] }> {
  values(): Iterable<T>;
}

/** Results smaller than this are cheap to spill and read back: no hold for them. */
export const HOLD_MIN_BYTES = 1 << 20;

export class FollowerHold {
  readonly #maxMs: number;
  readonly #onExpire: () => void;
  #key: string | undefined;
  #until = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(maxMs: number, onExpire: () => void) {
    this.#maxMs = maxMs;
    this.#onExpire = onExpire;
  }

  /** A task finished whose result `key` (of `bytes`) a dependent alone waits for. */
  start(key: string, bytes: number): void {
    if (bytes < HOLD_MIN_BYTES || this.#maxMs <= 0) return;
    this.clear();
    this.#key = key;
    this.#until = performance.now() + this.#maxMs;
    this.#timer = setTimeout(() => {
      this.clear();
      this.#onExpire();
    }, this.#maxMs);
    this.#timer.unref();
  }

  /** True while no other task should start: the hold runs and no queued task reads its key yet. */
  holding(queue: HoldQueue): boolean {
    return this.check(queue) === 'holding';
  }

  /**
   * `holding`: no other task should start yet; a task: the queued task that reads the key,
   * which ends the hold (that task should start first); `none`: no hold.
   */
  check<T extends { inputs: readonly string[] }>(queue: HoldQueue<T>): 'none' | 'holding' | T {
    const key = this.#key;
    if (key === undefined) return 'none';
    if (performance.now() >= this.#until) {
      this.clear();
      return 'none';
    }
    for (const task of queue.values()) {
      if (task.inputs.includes(key)) {
        this.clear();
        return task;
      }
    }
    return 'holding';
  }

  clear(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#key = undefined;
  }
}
