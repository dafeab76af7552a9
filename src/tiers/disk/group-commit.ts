import { DIRECT_MIN_BYTES, type DirectWrites, alignUp } from './direct-io.js';
import { writeFully } from './file-io.js';
import type { Landing, Segment } from './segment.js';

/**
 * Group writes in flight per segment. Each group has its own reserved range, so two
 * pwritev calls never overlap; with two, a batch's write does not wait for the one before
 * it to land, which would leave the main thread idle while spilling small values.
 */
const FLUSHES_IN_FLIGHT = 2;

/** What group commit counts, in the segment store's counters. */
export interface GroupCommitCounters {
  flushes: number;
  directFlushes: number;
}

/**
 * Group commit into segment files: appends reserve their range at once and are queued per
 * segment; the queue is written with one writev (or one direct write) on the next loop
 * turn, or at once when it holds `flushBytes`. An append resolves only once its bytes are
 * in the file.
 */
export class GroupCommit {
  readonly #flushBytes: number;
  readonly #direct: DirectWrites;
  readonly #counters: GroupCommitCounters;

  constructor(
    flushBytes: number,
    direct: DirectWrites,
    counters: GroupCommitCounters,
    /** Told when an append failed: the segment may now be deleted or compacted. */
    private readonly segments: { check(segment: Segment): void },
  ) {
    this.#flushBytes = flushBytes;
    this.#direct = direct;
    this.#counters = counters;
  }

  /**
   * Reserves `length` bytes at the end of `segment` and queues the pieces of values
   * `from` to `to` (exclusive) for its next flush.
   */
  enqueue(segment: Segment, pieces: readonly (readonly Uint8Array[])[], from: number, to: number, length: number, packed = false): Promise<Landing> {
    const offset = segment.size;
    if (!packed) segment.queuePacked = false;
    if (segment.queue.length === 0) segment.queueStart = offset;
    segment.size += length;
    segment.pending++;
    for (let i = from; i < to; i++) segment.queueRuns.push(pieces[i]);
    return new Promise<void>((resolve, reject) => {
      segment.queue.push({ resolve, reject });
      segment.queueBytes += length;
      this.#schedule(segment);
    }).then(
      () => ({ segment, offset }),
      (err: unknown) => {
        segment.pending--;
        this.segments.check(segment);
        throw err;
      },
    );
  }

  /** Flushes now if the group is big, else on the next loop turn so concurrent appends join it. */
  #schedule(seg: Segment): void {
    if (seg.flushing >= FLUSHES_IN_FLIGHT || seg.scheduled) return;
    if (seg.queueBytes >= this.#flushBytes) {
      void this.#flush(seg);
      return;
    }
    seg.scheduled = true;
    setImmediate(() => {
      seg.scheduled = false;
      void this.#flush(seg);
    });
  }

  async #flush(seg: Segment): Promise<void> {
    if (seg.flushing >= FLUSHES_IN_FLIGHT || seg.queue.length === 0) return;
    seg.flushing++;
    const group = seg.queue;
    const runs = seg.queueRuns;
    const packed = seg.queuePacked;
    const start = seg.queueStart;
    const end = start + seg.queueBytes;
    seg.queue = [];
    seg.queueRuns = [];
    seg.queuePacked = true;
    seg.queueBytes = 0;
    // A direct group's last block is padded, and the padding reserved (nothing was reserved
    // after `end` yet: every reservation since queueStart is in this group).
    const direct = this.#direct.on && end - alignUp(start) >= DIRECT_MIN_BYTES;
    const reservedEnd = direct ? alignUp(end) : end;
    if (direct) seg.size = reservedEnd;
    try {
      const handle = await seg.handle;
      const pieces = runs.length === 1 ? runs[0] : runs.flat();
      if (!direct || !(await this.#direct.writeGroup(seg, handle, pieces, start, end))) {
        await writeFully(handle, pieces, start, packed ? end - start : undefined);
      } else {
        this.#counters.directFlushes++;
      }
      this.#counters.flushes++;
      seg.landed(start, reservedEnd);
      for (const a of group) a.resolve();
    } catch (err) {
      // Nothing is placed in a failed range and nothing writes there again: final too.
      seg.landed(start, reservedEnd);
      for (const a of group) a.reject(err);
    } finally {
      seg.flushing--;
      if (seg.queue.length > 0) this.#schedule(seg);
    }
  }
}
