/**
 * A byte budget shared by concurrent transfers. A request for more than the whole budget
 * is granted alone (once nothing else holds any), so one huge value never deadlocks.
 */
export class ByteBudget {
  readonly capacity: number;
  private used = 0;
  private readonly waiters: Array<{ bytes: number; grant: () => void }> = [];

  constructor(capacity: number) {
    this.capacity = Math.max(1, capacity);
  }

  get inUse(): number {
    return this.used;
  }

  async acquire(bytes: number): Promise<number> {
    const take = Math.min(bytes, this.capacity);
    if (this.waiters.length === 0 && this.used + take <= this.capacity) {
      this.used += take;
      return take;
    }
    await new Promise<void>((grant) => this.waiters.push({ bytes: take, grant }));
    return take;
  }

  release(bytes: number): void {
    this.used -= bytes;
    // First come, first served: a large waiter is not starved by small ones behind it.
    while (this.waiters.length > 0 && this.used + this.waiters[0].bytes <= this.capacity) {
      const next = this.waiters.shift();
      if (next === undefined) break;
      this.used += next.bytes;
      next.grant();
    }
  }
}

/** Requests served at once over all of a server's connections; past the limit a request is answered "busy". */
export class RequestSlots {
  #active = 0;

  constructor(readonly limit: number) {}

  get active(): number {
    return this.#active;
  }

  /** Claims one slot; false when all are taken. */
  tryStart(): boolean {
    if (this.#active >= this.limit) return false;
    this.#active++;
    return true;
  }

  end(): void {
    this.#active--;
  }
}
