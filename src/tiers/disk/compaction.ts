import { TierCorruptError } from '../../errors.js';
import { readFully } from './file-io.js';
import type { Placements } from './placements.js';
import { nextWindow, type Landing, type LiveValue, type Segment } from './segment.js';
import { sortedLiveValues } from './segment-members.js';

/** Bytes read per step when compaction copies live values out of a segment. */
const COMPACT_WINDOW_BYTES = 4 * 1024 * 1024;
/** Values moved per step: a window of tiny values holds so many that one step would hold the loop too long. */
const COMPACT_WINDOW_VALUES = 2048;

/** The segment store as compaction sees it: where values are appended and placed. */
export interface CompactionTarget {
  readonly counters: { compactions: number; compactedBytes: number; compactionErrors: number };
  readonly isClosed: boolean;
  /** Reserves room in an active segment and queues the bytes; the caller ends the landing's pending append. */
  append(pieces: readonly Uint8Array[], length: number): Promise<Landing>;
  place(id: number, slot: number, segment: Segment, offset: number): void;
  unplace(slot: number, segment: Segment): void;
  /** Deletes a segment nobody needs, or queues a compaction if it is mostly dead. */
  check(segment: Segment): void;
  /** Ends a read of the segment (compaction reads it as a reader would). */
  unpin(segment: Segment): void;
}

/**
 * Compacts mostly dead segments, one at a time: copies each live value to an active
 * segment, window by window, and switches its place only once the copy is written; the
 * emptied segment is then deleted like any other.
 */
export class Compactor {
  readonly #queue: Segment[] = [];
  #run: Promise<void> | undefined;

  /**
   * `segmentBytes`: a segment's size; a window's live values, appended as one run, must fit
   * in one.
   */
  constructor(
    private readonly segments: CompactionTarget,
    private readonly placements: Placements,
    private readonly segmentBytes: number,
  ) {}

  /** The compactions under way (undefined when none is queued or running). */
  get running(): Promise<void> | undefined {
    return this.#run;
  }

  enqueue(segment: Segment): void {
    segment.compactQueued = true;
    this.#queue.push(segment);
    this.#run ??= this.#runAll();
  }

  /** Drops what is queued and waits for the compaction running, if any (the store is closing). */
  async stop(): Promise<void> {
    this.#queue.length = 0;
    await this.#run?.catch(() => undefined);
  }

  /**
   * The run is forgotten in the same step that finds the queue empty: cleared a microtask
   * later (in a `finally` on its promise), a segment queued in between found a run still
   * set, started none, and was never compacted.
   */
  async #runAll(): Promise<void> {
    // Runs after the caller has stored this run's promise (its end clears it).
    await null;
    try {
      for (let seg = this.#queue.shift(); seg !== undefined && !this.segments.isClosed; seg = this.#queue.shift()) {
        seg.compactQueued = false;
        if (seg.retired) continue;
        await this.#compact(seg).catch(() => this.segments.counters.compactionErrors++);
      }
    } finally {
      this.#run = undefined;
    }
  }

  async #compact(seg: Segment): Promise<void> {
    const { segments, placements } = this;
    seg.compacting = true;
    seg.readers++;
    try {
      // Listed and sorted with loop turns: a segment of tiny values holds millions.
      const live = await sortedLiveValues(seg, placements, () => segments.isClosed);
      const handle = await seg.handle;
      // One window buffer for the whole segment: each window's moves are written (awaited)
      // before the next read fills it again.
      let buffer: Buffer | undefined;
      const windowBytes = Math.min(COMPACT_WINDOW_BYTES, this.segmentBytes);
      for (let at = 0; live !== undefined && at < live.count && !segments.isClosed; ) {
        const values = live.slice(at, at + COMPACT_WINDOW_VALUES);
        const { to, base, span } = nextWindow(values, 0, windowBytes);
        at += to;
        if (buffer === undefined || buffer.byteLength < span) buffer = Buffer.allocUnsafe(Math.max(span, windowBytes));
        const window = buffer.subarray(0, span);
        await readFully(handle, window, 0, span, base);
        await this.#move(values.slice(0, to), seg, window, base);
      }
      segments.counters.compactions++;
    } catch (err) {
      seg.compactRetryAt = Date.now() + 1000;
      throw err;
    } finally {
      seg.compacting = false;
      segments.unpin(seg);
      segments.check(seg);
    }
  }

  /**
   * Copies a window's values still in `from` as one run (one reservation, one append: an
   * append and its promises per value would hold the loop for a window of tiny values), then
   * switches the place of those still there once it is written. One removed meanwhile
   * leaves its copy as dead space in the new segment.
   */
  async #move(values: readonly LiveValue[], from: Segment, window: Buffer, base: number): Promise<void> {
    const { segments } = this;
    // Offsets are taken now: values removed while the window was read are not copied.
    const moving = values.filter((value) => this.#stillAt(value, from));
    if (moving.length === 0) return;
    const pieces: Uint8Array[] = [];
    let length = 0;
    for (const value of moving) {
      const bytes = window.subarray(value.offset - base, value.offset - base + value.stored);
      // A window that cut a value short would place it over its new neighbour's bytes.
      if (bytes.byteLength !== value.stored) throw new TierCorruptError(`compaction window holds ${bytes.byteLength} of value ${value.id}'s ${value.stored} bytes`);
      pieces.push(bytes);
      length += bytes.byteLength;
    }
    const to = await segments.append(pieces, length);
    to.segment.pending--;
    let offset = to.offset;
    for (const value of moving) {
      if (!segments.isClosed && this.#stillAt(value, from)) {
        const slot = this.placements.slotOf(value.id);
        segments.unplace(slot, from);
        segments.place(value.id, slot, to.segment, offset);
        segments.counters.compactedBytes += value.stored;
      }
      offset += value.stored;
    }
    segments.check(to.segment);
  }

  /** The value is where compaction read it (not removed, nor removed and written again under its id). */
  #stillAt(value: LiveValue, seg: Segment): boolean {
    const { placements } = this;
    const slot = placements.slotOf(value.id);
    return slot >= 0 && placements.segment(slot) === seg.no && placements.offset(slot) === value.offset;
  }
}
