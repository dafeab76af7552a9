import type { FileHandle } from 'node:fs/promises';

/** A segment file's state, and the shapes the segment store (segment-store.ts) works with and hands out. */

export interface QueuedAppend {
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class Segment {
  /** End of reserved space: the file's size once every queued append is flushed. */
  size = 0;
  liveBytes = 0;
  liveCount = 0;
  /** Appends reserved but not yet placed (queued, flushing, or awaiting their result). */
  pending = 0;
  sealed = false;
  retired = false;
  compacting = false;
  compactQueued = false;
  /** After a failed compaction (disk full...), do not retry before this time, or it would spin. */
  compactRetryAt = 0;
  readers = 0;
  /**
   * Ids of the values placed here, in the order their writes landed (compaction sorts
   * them by offset). Those moved or removed since are pruned once they outnumber the live
   * ones, so a segment of many tiny values that come and go does not list every dead one.
   */
  members: number[] = [];
  /** A prune of `members` is under way (segment-members.ts): it runs across loop turns. */
  pruning = false;
  queue: QueuedAppend[] = [];
  /**
   * The queued appends' bytes, in order, as the lists of pieces they came in (not copied
   * piece by piece into one list: a packed batch is thousands): the next flush writes them
   * with one writev.
   */
  queueRuns: (readonly Uint8Array[])[] = [];
  /**
   * Every queued run is a packed batch, whose pieces' total was checked: the flush hands
   * them to writev as they are, without another pass to join neighbours (the store's
   * PackedLayout already did; a piece left touching the next only costs an iovec).
   */
  queuePacked = true;
  queueBytes = 0;
  queueStart = 0;
  /** End of the prefix of the file whose group writes have all ended: those bytes never change again. */
  landedEnd = 0;
  /** Group writes that ended ahead of an earlier one still in flight: start → end. */
  readonly landedAhead = new Map<number, number>();
  /** Group writes in flight (at most FLUSHES_IN_FLIGHT). */
  flushing = 0;
  /** A write-only O_DIRECT handle, opened by the first direct flush (undefined inside if refused). */
  direct: Promise<FileHandle | undefined> | undefined;
  scheduled = false;
  constructor(
    /** Its number in the placements' segment column. */
    readonly no: number,
    /** The SegmentStore's lane it was the active segment of. */
    readonly lane: number,
    readonly path: string,
    readonly handle: Promise<FileHandle>,
  ) {}

  /**
   * A group write of [start, end) has ended: the prefix of the file that can no longer
   * change grows over it, and over groups that ended before it out of order. A group of
   * empty values covers no byte: recorded ahead under its start, it would overwrite (and
   * lose) a real group that starts at the same offset, and `landedEnd` would stop there.
   */
  landed(start: number, end: number): void {
    if (end === start) return;
    if (start !== this.landedEnd) {
      this.landedAhead.set(start, end);
      return;
    }
    this.landedEnd = end;
    for (let next = this.landedAhead.get(end); next !== undefined; next = this.landedAhead.get(this.landedEnd)) {
      this.landedAhead.delete(this.landedEnd);
      this.landedEnd = next;
    }
  }
}

/** A value compaction copies: its id and where it was when its window was read. */
export interface LiveValue {
  readonly id: number;
  readonly offset: number;
  readonly stored: number;
}

/** A span of a segment compaction reads at once: values `from` to `to` (exclusive) of its sorted list. */
export interface CompactWindow {
  readonly from: number;
  readonly to: number;
  readonly base: number;
  readonly span: number;
}

/**
 * Cuts a segment's live values into windows of at most `windowBytes` (one value bigger
 * than that gets a window of its own). Sorts `live` by offset, and by length among equal
 * offsets: an empty value shares its offset with the value appended after it.
 */
export function compactWindows(live: LiveValue[], windowBytes: number): CompactWindow[] {
  live.sort((a, b) => a.offset - b.offset || a.stored - b.stored);
  const windows: CompactWindow[] = [];
  for (let from = 0; from < live.length; from = windows[windows.length - 1].to) windows.push(nextWindow(live, from, windowBytes));
  return windows;
}

/**
 * The window of sorted `live` values that starts at `from`: at most `windowBytes` (one
 * value bigger than that alone). It ends at the furthest end of its values, not at the end
 * of its last one: ending at an empty value sorted after a real one at the same offset cut
 * that value's bytes short, and compaction then placed it over its new neighbour's bytes.
 */
export function nextWindow(live: readonly LiveValue[], from: number, windowBytes: number): CompactWindow {
  const base = live[from].offset;
  let end = base + live[from].stored;
  let to = from + 1;
  for (; to < live.length; to++) {
    const next = Math.max(end, live[to].offset + live[to].stored);
    if (next - base > windowBytes) break;
    end = next;
  }
  return { from, to, base, span: end - base };
}

/** Where an append landed. */
export interface Landing {
  readonly segment: Segment;
  readonly offset: number;
}

/** A segment file as diagnostics see it. */
export interface SegmentFile {
  path: string;
  /** File size: live, dead and queued bytes. */
  bytes: number;
  liveValues: number;
  liveBytes: number;
  /** Records of values the segment still tracks (live, and dead ones not yet pruned). */
  records: number;
}

/** A placement whose file stays open until `release`, even if compaction moves the value. */
export interface PinnedPlacement {
  readonly handle: Promise<FileHandle>;
  readonly offset: number;
  readonly length: number;
  /** The file's bytes before this offset will never change (read-ahead may cover them). */
  readonly finalEnd: number;
  release(): void;
}

