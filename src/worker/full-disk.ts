import type { SpillStore } from '../store/spill-store.js';

/**
 * Watches a paused store whose spill writes fail (a full disk) while its values no longer
 * fit the memory limit: nothing will resume it, so after `timeoutMs` the worker is told to
 * fail its queued tasks with a clear error instead of holding them forever.
 */
export class FullDiskWatch {
  readonly #store: SpillStore;
  readonly #timeoutMs: number;
  readonly #onStuck: (failure: Error) => void;
  #timer: NodeJS.Timeout | undefined;
  #since: number | undefined;

  constructor(store: SpillStore, timeoutMs: number, onStuck: (failure: Error) => void) {
    this.#store = store;
    this.#timeoutMs = timeoutMs;
    this.#onStuck = onStuck;
    store.on('pause', () => this.#start());
    store.on('resume', () => this.stop());
  }

  #start(): void {
    if (this.#timer !== undefined) return;
    this.#since = undefined;
    this.#timer = setInterval(() => this.#check(), Math.max(10, Math.min(1000, this.#timeoutMs / 4)));
    this.#timer.unref();
  }

  #check(): void {
    const failure = this.#store.writeFailure;
    if (!this.#store.paused || failure === undefined || this.#store.closed) {
      this.#since = undefined; // writes land again, or it resumed: not stuck
      if (!this.#store.paused || this.#store.closed) this.stop();
      return;
    }
    this.#since ??= performance.now();
    if (performance.now() - this.#since < this.#timeoutMs) return;
    this.#since = undefined;
    this.#onStuck(failure);
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
