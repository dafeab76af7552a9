/**
 * Collects garbage for a store under memory pressure, once it has let go of enough values.
 *
 * Why: spilling or deleting a value only drops the store's reference; its memory returns
 * when V8 collects, and V8 sizes its collections by the JS heap, not by the ArrayBuffers
 * outside it. A worker whose heap is 15 MiB was measured holding 100+ MiB of dead values
 * in RSS, and the memory monitor, seeing RSS still high, spilled yet more. So when RSS is
 * over the target and at least `minReleasedBytes` were let go since the last collection,
 * the store collects before it spills again.
 *
 * A full collection costs milliseconds to tens of milliseconds on the event loop, so it is
 * rationed: never within `minIntervalMs` of the last one, and never more than
 * `maxTimeFraction` of the time since the previous collection ended.
 */
export class ReleaseCollector {
  #released = 0;
  #lastEnd = -Infinity;
  #lastDuration = 0;

  constructor(
    private readonly gc: () => void,
    private readonly minReleasedBytes: number,
    private readonly minIntervalMs = 100,
    private readonly maxTimeFraction = 0.25,
  ) {}

  /** The store let go of a value of `bytes` (deleted, or dropped after it was spilled). */
  released(bytes: number): void {
    this.#released += bytes;
  }

  /** Bytes let go of since the last collection. */
  get pendingBytes(): number {
    return this.#released;
  }

  /** Milliseconds the last collection took. */
  get lastDurationMs(): number {
    return this.#lastDuration;
  }

  /**
   * Collects if enough was released and the ration allows (`unrationed`: whatever the
   * ration says, for a caller about to need the memory); true when it did.
   */
  maybeCollect(now = performance.now(), unrationed = false): boolean {
    if (this.#released < this.minReleasedBytes) return false;
    const since = now - this.#lastEnd;
    const rationed = since < this.minIntervalMs || since < this.#lastDuration * (1 / this.maxTimeFraction - 1);
    if (rationed && !unrationed) return false;
    const start = performance.now();
    this.gc();
    const end = performance.now();
    this.#released = 0;
    this.#lastEnd = end;
    this.#lastDuration = end - start;
    return true;
  }
}
