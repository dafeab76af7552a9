import { LeaseReleasedError, NotLeasedError } from '../errors.js';

/**
 * Values pinned in memory for as long as the lease is held: a running task's inputs, an
 * outgoing transfer. Pinned keys are never evicted. Release it (or use `using`) when done.
 */
export class Lease implements Disposable {
  readonly #values: ReadonlyMap<string, unknown>;
  #onRelease: (() => void) | undefined;

  constructor(values: ReadonlyMap<string, unknown>, onRelease: () => void) {
    this.#values = values;
    this.#onRelease = onRelease;
  }

  get released(): boolean {
    return this.#onRelease === undefined;
  }

  get keys(): string[] {
    return [...this.#values.keys()];
  }

  has(key: string): boolean {
    return this.#values.has(key);
  }

  get<T = unknown>(key: string): T {
    if (this.released) throw new LeaseReleasedError();
    if (!this.#values.has(key)) throw new NotLeasedError(key);
    return this.#values.get(key) as T;
  }

  /** Unpins every key. Calling it again does nothing. */
  release(): void {
    const onRelease = this.#onRelease;
    this.#onRelease = undefined;
    onRelease?.();
  }

  [Symbol.dispose](): void {
    this.release();
  }
}
