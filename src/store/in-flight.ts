/** The store's background writes and moves in flight: what its flush and close wait for. */
export class InFlight {
  readonly #work = new Set<Promise<unknown>>();

  get size(): number {
    return this.#work.size;
  }

  /** The work in flight now. */
  current(): Promise<unknown>[] {
    return [...this.#work];
  }

  /** Counts `work` in flight until it settles. */
  track(work: Promise<unknown>): void {
    this.#work.add(work);
    void work.finally(() => this.#work.delete(work)).catch(() => undefined);
  }

  add(work: Promise<unknown>): void {
    this.#work.add(work);
  }

  delete(work: Promise<unknown>): void {
    this.#work.delete(work);
  }

  /** Resolves when nothing is in flight, work started meanwhile included. */
  async settled(): Promise<void> {
    while (this.#work.size > 0) await Promise.allSettled([...this.#work]);
  }
}
