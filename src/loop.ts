/** Sharing the event loop: long CPU-bound loops give other callbacks (sockets, timers) their turn. */

/** Resolves on the next loop turn, after pending I/O callbacks. */
export const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Cuts a long synchronous loop into stretches of `sliceMs`, with a loop turn in between. */
export class Slicer {
  #start = performance.now();
  #busy = 0;
  #calls = 0;

  /**
   * `checkEvery`: read the clock on every n-th call of `due` only, for loops whose steps
   * take a microsecond or two (a clock read is not free, and a batch of small values asks
   * three times per value).
   */
  constructor(
    private readonly sliceMs = 2,
    private readonly checkEvery = 1,
  ) {}

  /** True once the current stretch has run for `sliceMs` (seen on every `checkEvery`-th call). */
  due(): boolean {
    if (++this.#calls < this.checkEvery) return false;
    this.#calls = 0;
    return performance.now() - this.#start > this.sliceMs;
  }

  async turn(): Promise<void> {
    this.#busy += performance.now() - this.#start;
    await yieldToLoop();
    this.#start = performance.now();
  }

  /** Time spent working so far, turns excluded. */
  busySeconds(): number {
    return (this.#busy + performance.now() - this.#start) / 1000;
  }
}
