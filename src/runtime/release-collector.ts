import type { MajorCollectionListener } from './garbage-collection.js';

/**
 * Collects garbage for a store under memory pressure, once it has let go of enough values.
 *
 * Why: spilling or deleting a value only drops the store's reference; its memory returns
 * when V8 collects, and V8 sizes its collections by the JS heap, not by the ArrayBuffers
 * outside it. A worker with a small heap can hold many times that in dead values in RSS,
 * and the memory monitor, seeing RSS still high, would spill yet more. So when RSS is
 * over the target and at least `minReleasedBytes` were let go since the last collection,
 * the store collects before it spills again. A caller about to need the memory at once
 * (`SpillStore.collectGarbage(true)`) collects unrationed, and half as much let go of will
 * do for it. The worker's room-making before a task keeps to the ration (worker/room.ts).
 *
 * A full collection costs milliseconds to tens of milliseconds on the event loop, so it is
 * rationed: never within `minIntervalMs` of the last one, and never more than
 * `maxTimeFraction` of the time since the previous collection ended.
 *
 * The major collections V8 runs on its own (as a listener, see garbage-collection.ts)
 * count too. They end the ration's interval like ours: a forced collection right after one
 * of V8's makes the worst event-loop pauses. And they free what was let go of before their
 * marking started, so those bytes are no longer due: a forced collection would mostly
 * collect what V8 was about to. Bytes let go of after marking started are still due: the
 * value may already have been marked live.
 *
 * While V8 is marking, the collector does not force a collection (for up to
 * `MARKING_WAIT_MS`): `gc()` then first finishes V8's cycle, atomically, and collects a
 * second time, a long pause. V8's own cycle ends soon and frees what was let go of before
 * it began.
 *
 * Given `collectable` (the bytes only a collection frees: the JS heap and the ArrayBuffers
 * in use), the ration also follows what the forced collections free. The bytes let go of
 * count values the store freed itself, for the garbage that carried them (socket reads,
 * records); where there is none (values made by task threads, read from disk, freed at
 * once), a forced collection frees next to nothing and still pauses the loop for a full
 * marking, tens of milliseconds on a loaded host. So one that frees less than
 * `1 / LOW_YIELD` of the bytes it was due makes the next wait for twice as many (up to
 * `MAX_BACKOFF` times), and one that frees more brings the ration back.
 */
/** How long a marking cycle V8 started holds forced collections back, at most (ms). */
export const MARKING_WAIT_MS = 500;
/** A forced collection freeing under 1 / this of the bytes it was due doubles the next one's. */
export const LOW_YIELD = 4;
/** The most the bytes due can grow, as a multiple of `minReleasedBytes`. */
export const MAX_BACKOFF = 8;

/** The JS heap's used bytes and the ArrayBuffers' bytes: what only a collection frees. */
export function collectableBytes(): number {
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

export class ReleaseCollector implements MajorCollectionListener {
  /** Bytes let go of since the store opened (only grows). */
  #releasedTotal = 0;
  /** Of those, bytes a finished collection has had the chance to free. */
  #collectedTotal = 0;
  /** `#releasedTotal` when V8's current marking cycle started, if one is under way. */
  #atMarkingStart: number | undefined;
  /** When that cycle's marking started (ms). */
  #markingSince = -Infinity;
  #lastEnd = -Infinity;
  #lastDuration = 0;
  /** When and how long this collector's own last collection ran. */
  #ownEnd = -Infinity;
  #ownDuration = 0;
  /** The bytes due, as a multiple of `minReleasedBytes` (see `collectable`). */
  #backoff = 1;

  private readonly minIntervalMs: number;
  private readonly maxTimeFraction: number;
  private readonly collectable: (() => number) | undefined;

  constructor(
    private readonly gc: () => void,
    private readonly minReleasedBytes: number,
    ration: { minIntervalMs?: number; maxTimeFraction?: number; collectable?: () => number } = {},
  ) {
    this.minIntervalMs = ration.minIntervalMs ?? 100;
    this.maxTimeFraction = ration.maxTimeFraction ?? 0.25;
    this.collectable = ration.collectable;
  }

  /** The store let go of a value of `bytes` (deleted, or dropped after it was spilled). */
  released(bytes: number): void {
    this.#releasedTotal += bytes;
  }

  /** Bytes let go of that no collection has had the chance to free yet. */
  get pendingBytes(): number {
    return this.#releasedTotal - this.#collectedTotal;
  }

  /** The bytes let go of that the next collection waits for (half as many unrationed). */
  get dueBytes(): number {
    return this.minReleasedBytes * this.#backoff;
  }

  /** Milliseconds the last collection this collector ran took. */
  get lastDurationMs(): number {
    return this.#ownDuration;
  }

  markingStarted(atMs: number): void {
    // A cycle our own collection already finished (reported late) is not a new one.
    if (atMs < this.#ownEnd) return;
    // Reported a turn or so late: values let go of in that turn count as freed by this cycle.
    if (this.#atMarkingStart === undefined) {
      this.#atMarkingStart = this.#releasedTotal;
      this.#markingSince = atMs;
    }
  }

  /** V8 is marking (a cycle it started and has not finished, as far as reported). */
  marking(now = performance.now()): boolean {
    return this.#atMarkingStart !== undefined && now - this.#markingSince < MARKING_WAIT_MS;
  }

  collected(endMs: number, durationMs: number): void {
    // Our own collection reported again (its end is `#lastEnd` or before), or an older one.
    if (endMs <= this.#lastEnd) return;
    this.#lastEnd = endMs;
    this.#lastDuration = durationMs;
    // Without a marking start seen, it was an atomic collection: what it freed is unknown.
    if (this.#atMarkingStart !== undefined) this.#collectedTotal = Math.max(this.#collectedTotal, this.#atMarkingStart);
    this.#atMarkingStart = undefined;
  }

  /**
   * Collects if enough was released, V8 is not marking, and the ration allows
   * (`unrationed`: whatever the ration says, for a caller about to need the memory); true
   * when it did.
   */
  maybeCollect(now = performance.now(), unrationed = false): boolean {
    // Unrationed calls come from a caller about to need the memory: half as much will do.
    const threshold = unrationed ? this.dueBytes / 2 : this.dueBytes;
    const pending = this.pendingBytes;
    if (pending < threshold || this.marking(now)) return false;
    const since = now - this.#lastEnd;
    const rationed = since < this.minIntervalMs || since < this.#lastDuration * (1 / this.maxTimeFraction - 1);
    if (rationed && !unrationed) return false;
    const collectable = this.collectable;
    const before = collectable?.() ?? 0;
    const start = performance.now();
    this.gc();
    const end = performance.now();
    if (collectable !== undefined) {
      const freed = before - collectable();
      this.#backoff = freed * LOW_YIELD < pending ? Math.min(this.#backoff * 2, MAX_BACKOFF) : 1;
    }
    this.#collectedTotal = this.#releasedTotal;
    // A forced collection finishes any marking under way.
    this.#atMarkingStart = undefined;
    this.#ownEnd = this.#lastEnd = end;
    this.#ownDuration = this.#lastDuration = end - start;
    return true;
  }
}
