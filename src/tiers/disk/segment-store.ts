import fsp from 'node:fs/promises';
import path from 'node:path';
import { ClosedError } from '../../errors.js';
import { Compactor, type CompactionTarget } from './compaction.js';
import { DirectWrites } from './direct-io.js';
import { ignoreMissing } from './file-io.js';
import { GroupCommit } from './group-commit.js';
import { NO_SEGMENT, type Placements } from './placements.js';
import { pruneMembers } from './segment-members.js';
import { Segment, type Landing, type PinnedPlacement, type SegmentFile } from './segment.js';

export type { PinnedPlacement, SegmentFile } from './segment.js';

/**
 * Fused segment files for small values: values are appended to a shared file per
 * directory and located by (segment, offset, length). Appends that arrive together are
 * written with one writev ("group commit"); a write resolves only once its bytes are in
 * the file, so a failed flush never loses a value the caller still holds.
 *
 * Where each value lives is kept in the tier's `Placements` (typed-array columns, no
 * object per value); a segment lists the ids placed in it, for compaction (compaction.ts).
 */

export interface SegmentStoreOptions {
  /** Folders this tier owns, `lanes` active segments each; appends rotate among them. */
  directories: readonly string[];
  /** Active segments per directory (see DiskTierOptions.segmentLanes). */
  lanes: number;
  segmentBytes: number;
  /** Compact a sealed segment once this fraction of it is dead. */
  compactDeadFraction: number;
  /** Flush a group once it holds this many bytes, without waiting for the next loop turn. */
  flushBytes: number;
  /** Write groups past the page cache where the filesystem allows (see DiskTierOptions.directWrites). */
  directWrites: boolean;
}

/** A segment's list of values is pruned of dead records once it holds this many and they outnumber the live ones. */
const PRUNE_FROM = 1024;

export class SegmentStore implements CompactionTarget {
  private readonly active: (Segment | undefined)[];
  /** Every segment not yet retired, by number. */
  private readonly segments = new Map<number, Segment>();
  private readonly unlinks = new Set<Promise<void>>();
  private readonly compactor: Compactor;
  readonly direct: DirectWrites;
  readonly #commit: GroupCommit;
  private nextLane = 0;
  private seq = 0;
  private closed = false;

  get isClosed(): boolean {
    return this.closed;
  }
  readonly counters = { segmentsCreated: 0, segmentsDeleted: 0, compactions: 0, compactedBytes: 0, compactionErrors: 0, flushes: 0, directFlushes: 0 };

  constructor(
    private readonly options: SegmentStoreOptions,
    private readonly placements: Placements,
  ) {
    // Buffered writes into one file are serialized by the kernel (ext4 holds the inode's lock
    // for a whole write): a second flush in flight on a segment waits for the first, while
    // two segments take writes in parallel (docs/tiers.md, write lanes).
    this.active = new Array<Segment | undefined>(options.directories.length * options.lanes).fill(undefined);
    this.direct = new DirectWrites(options.directWrites);
    this.#commit = new GroupCommit(options.flushBytes, this.direct, this.counters, this);
    this.compactor = new Compactor(this, placements, options.segmentBytes);
  }

  /** Appends the stored bytes of a registered id; resolves once they are in the file and the id is placed. */
  async put(id: number, pieces: readonly Uint8Array[]): Promise<void> {
    if (this.closed) throw new ClosedError('segment store');
    const slot = this.placements.slotOf(id);
    const landing = await this.append(pieces, this.placements.stored(slot));
    const seg = landing.segment;
    if (this.closed) throw new ClosedError('segment store');
    this.place(id, slot, seg, landing.offset);
    seg.pending--;
    this.check(seg);
  }

  /**
   * Appends many values at once: each run of values that fits in one segment is one
   * reservation and one queued append (so one writev, with its neighbours). Resolves to
   * one entry per value, in order: undefined once it is placed, else its run's error.
   */
  async putMany(ids: readonly number[], slots: readonly number[], pieces: readonly (readonly Uint8Array[])[]): Promise<unknown[]> {
    if (this.closed) throw new ClosedError('segment store');
    const { placements } = this;
    const runs: { from: number; to: number; landing: Promise<Landing> }[] = [];
    for (let from = 0; from < slots.length; ) {
      const first = placements.stored(slots[from]);
      const seg = this.activeFor(first);
      const room = this.options.segmentBytes - seg.size;
      let to = from + 1;
      let length = first;
      while (to < slots.length && length + placements.stored(slots[to]) <= room) length += placements.stored(slots[to++]);
      runs.push({ from, to, landing: this.#commit.enqueue(seg, pieces, from, to, length) });
      from = to;
    }
    const settled = await Promise.allSettled(runs.map((r) => r.landing));
    const failures: unknown[] = new Array(slots.length).fill(undefined);
    // Made only if needed, once per call: an error captures a stack trace.
    let closed: ClosedError | undefined;
    settled.forEach((run, r) => {
      const { from, to } = runs[r];
      if (run.status === 'rejected') {
        for (let i = from; i < to; i++) failures[i] = run.reason;
        return;
      }
      const { segment } = run.value;
      let at = run.value.offset;
      for (let i = from; i < to; i++) {
        if (this.closed) failures[i] = closed ??= new ClosedError('segment store');
        else this.place(ids[i], slots[i], segment, at);
        at += placements.stored(slots[i]);
      }
      segment.pending--;
      this.check(segment);
    });
    return failures;
  }

  /**
   * Appends a packed batch as one run (one reservation, one queued append): the values are
   * placed back to back from its offset, except those whose slot is -1 (refused by the
   * caller), whose bytes stay as dead space. Resolves once the bytes are in the file.
   */
  async putPacked(ids: readonly number[], slots: readonly number[], lengths: readonly number[], pieces: readonly Uint8Array[], byteLength: number): Promise<void> {
    if (this.closed) throw new ClosedError('segment store');
    const { segment, offset } = await this.#commit.enqueue(this.activeFor(byteLength), [pieces], 0, 1, byteLength, true);
    try {
      if (this.closed) throw new ClosedError('segment store');
      let at = offset;
      for (let i = 0; i < ids.length; i++) {
        if (slots[i] >= 0) this.place(ids[i], slots[i], segment, at);
        at += lengths[i];
      }
    } finally {
      segment.pending--;
      this.check(segment);
    }
  }

  /** Pins the value's segment so its file stays open while the caller reads; undefined when not placed. */
  pin(id: number): PinnedPlacement | undefined {
    const slot = this.placements.slotOf(id);
    const seg = this.segmentOf(slot);
    if (seg === undefined) return undefined;
    seg.readers++;
    let released = false;
    return {
      handle: seg.handle,
      offset: this.placements.offset(slot),
      length: this.placements.stored(slot),
      finalEnd: seg.landedEnd,
      release: () => {
        if (released) return;
        released = true;
        this.unpin(seg);
      },
    };
  }

  /** Unplaces a value (the caller then forgets its id); its bytes become dead space, reclaimed by deletion or compaction. */
  remove(id: number): boolean {
    const slot = this.placements.slotOf(id);
    const seg = this.segmentOf(slot);
    if (seg === undefined) return false;
    this.unplace(slot, seg);
    this.check(seg);
    return true;
  }

  /** The segment file a value is in, if placed. */
  pathOf(id: number): string | undefined {
    return this.segmentOf(this.placements.slotOf(id))?.path;
  }

  /** Bytes of all segment files (live, dead and queued). */
  fileBytes(): number {
    let total = 0;
    for (const seg of this.segments.values()) total += seg.size;
    return total;
  }

  /** Every segment file with its size and live values (diagnostics and tests). */
  list(): SegmentFile[] {
    return [...this.segments.values()].map((seg) => ({
      path: seg.path,
      bytes: seg.size,
      liveValues: seg.liveCount,
      liveBytes: seg.liveBytes,
      records: seg.members.length,
    }));
  }

  segmentCount(): number {
    return this.segments.size;
  }

  /** Resolves once no compaction is queued or running and deleted segment files are gone. */
  async idle(): Promise<void> {
    while (this.compactor.running !== undefined || this.unlinks.size > 0) {
      await this.compactor.running;
      await Promise.all(this.unlinks);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.compactor.stop();
    const handles = [...this.segments.values()].flatMap((seg) => [seg.handle.then((h) => h.close()).catch(() => undefined), closeDirect(seg)]);
    this.segments.clear();
    await Promise.all([...handles, ...this.unlinks]);
  }

  private segmentOf(slot: number): Segment | undefined {
    if (slot < 0) return undefined;
    const no = this.placements.segment(slot);
    return no === NO_SEGMENT ? undefined : this.segments.get(no);
  }

  place(id: number, slot: number, segment: Segment, offset: number): void {
    this.placements.place(slot, segment.no, offset);
    segment.members.push(id);
    segment.liveCount++;
    segment.liveBytes += this.placements.stored(slot);
  }

  unplace(slot: number, segment: Segment): void {
    this.placements.unplace(slot);
    segment.liveCount--;
    segment.liveBytes -= this.placements.stored(slot);
    // Amortized O(1): a prune halves the array at least, and waits for PRUNE_FROM dead
    // records. Sliced: its first slice runs now, the rest in later loop turns.
    const dead = segment.members.length - segment.liveCount;
    if (!segment.pruning && dead >= PRUNE_FROM && dead > segment.liveCount) void pruneMembers(segment, this.placements, () => this.closed);
  }

  /** Reserves space in the next directory's active segment and queues the bytes for it. */
  append(pieces: readonly Uint8Array[], length: number): Promise<Landing> {
    return this.#commit.enqueue(this.activeFor(length), [pieces], 0, 1, length);
  }

  /** The next lane's active segment, sealed and replaced if `length` would overflow it. */
  private activeFor(length: number): Segment {
    const lane = this.nextLane++ % this.active.length;
    let seg = this.active[lane];
    if (seg !== undefined && seg.size > 0 && seg.size + length > this.options.segmentBytes) {
      this.seal(seg);
      seg = undefined;
    }
    return seg ?? this.create(lane);
  }

  /** A new segment for `lane` (lane i writes into directory i modulo the number of directories). */
  private create(lane: number): Segment {
    const no = this.seq++;
    const file = path.join(this.options.directories[lane % this.options.directories.length], `segment-${no}.spws`);
    // 'wx+': read and write, and never reuse a file that is already there.
    const handle = fsp.open(file, 'wx+');
    handle.catch(() => undefined);
    const seg = new Segment(no, lane, file, handle);
    this.active[lane] = seg;
    this.segments.set(seg.no, seg);
    this.counters.segmentsCreated++;
    return seg;
  }

  private seal(seg: Segment): void {
    seg.sealed = true;
    if (this.active[seg.lane] === seg) this.active[seg.lane] = undefined;
    this.check(seg);
  }

  /** Deletes a segment nobody needs, or queues a compaction if it is mostly dead. */
  check(seg: Segment): void {
    if (seg.retired || seg.compacting || seg.pending > 0) return;
    if (seg.liveCount === 0) {
      this.retire(seg);
      return;
    }
    const dead = seg.size - seg.liveBytes;
    const due = !seg.compactQueued && Date.now() >= seg.compactRetryAt;
    if (seg.sealed && !this.closed && due && dead >= seg.size * this.options.compactDeadFraction) {
      this.compactor.enqueue(seg);
    }
  }

  private retire(seg: Segment): void {
    seg.retired = true;
    seg.members = [];
    if (this.active[seg.lane] === seg) this.active[seg.lane] = undefined;
    this.segments.delete(seg.no);
    this.counters.segmentsDeleted++;
    // Unlink now; a pinned reader keeps its open descriptor and finishes its read.
    const unlink = fsp
      .unlink(seg.path)
      .catch(ignoreMissing)
      .catch(() => undefined)
      .finally(() => this.unlinks.delete(unlink));
    this.unlinks.add(unlink);
    // Nothing writes to a retired segment (no append is pending): readers use the other handle.
    void closeDirect(seg);
    if (seg.readers === 0) void seg.handle.then((h) => h.close()).catch(() => undefined);
  }

  unpin(seg: Segment): void {
    seg.readers--;
    if (seg.retired && seg.readers === 0) void seg.handle.then((h) => h.close()).catch(() => undefined);
  }
}

/** Closes a segment's direct handle if one was opened. */
function closeDirect(seg: Segment): Promise<void> {
  const direct = seg.direct;
  seg.direct = undefined;
  return direct === undefined ? Promise.resolve() : direct.then((h) => h?.close()).catch(() => undefined);
}
