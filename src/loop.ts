/** Sharing the event loop: long CPU-bound loops give other callbacks (sockets, timers) their turn. */

/** Resolves on the next loop turn, after pending I/O callbacks. */
export const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Cuts a long synchronous loop into stretches of `sliceMs`, with a loop turn in between. */
export class Slicer {
  #start = performance.now();
  #busy = 0;

  constructor(private readonly sliceMs = 2) {}

  /** True once the current stretch has run for `sliceMs`. */
  due(): boolean {
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
