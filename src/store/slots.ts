/**
 * A counting semaphore that also knows how many are waiting: the spiller's write slots.
 * `busy` counts holders and waiters, so the pump never queues more than it can run.
 */
export class Slots {
  #active = 0;
  readonly #waiters: (() => void)[] = [];

  constructor(readonly size: number) {}

  /** Holders plus waiters. */
  get busy(): number {
    return this.#active + this.#waiters.length;
  }

  get full(): boolean {
    return this.busy >= this.size;
  }

  /** Runs `work` once a slot is free. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.#active >= this.size) await new Promise<void>((resolve) => this.#waiters.push(resolve));
    else this.#active++;
    try {
      return await work();
    } finally {
      const next = this.#waiters.shift();
      // Hand the slot straight to the next waiter, so nobody can jump the queue.
      if (next !== undefined) next();
      else this.#active--;
    }
  }
}
