/**
 * Synchronous work allowed per event-loop turn before writes wait for the next one. The
 * pump starts up to 64 small writes at once, and their encoding runs back to back as
 * microtasks: without a budget, one turn could lay out tens of MiB and stall the loop.
 * Large values are hashed in slices between I/O.
 */
export class TurnBudget {
  #spent = 0;
  #resetScheduled = false;

  constructor(private readonly bytesPerTurn: number) {}

  async spend(bytes: number): Promise<void> {
    while (this.#spent > 0 && this.#spent + bytes > this.bytesPerTurn) {
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    this.#spent += bytes;
    if (!this.#resetScheduled) {
      this.#resetScheduled = true;
      setImmediate(() => {
        this.#spent = 0;
        this.#resetScheduled = false;
      });
    }
  }
}


/** Shared by every store in the process: they share one event loop. */
export const turnBudget = new TurnBudget(4 * 1024 * 1024);
