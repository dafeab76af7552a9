import fsp, { type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { ClosedError } from '../errors.js';
import { ignoreMissing, readFully, writeFully } from './file-io.js';

/**
 * Fused segment files for small values: values are appended to a shared file per
 * directory and located by (segment, offset, length). Appends that arrive together are
 * written with one writev ("group commit"); a write resolves only once its bytes are in
 * the file, so a failed flush never loses a value the caller still holds.
 */

export interface SegmentStoreOptions {
  /** Folders this tier owns, one active segment each; appends rotate among them. */
  directories: readonly string[];
  segmentBytes: number;
  /** Compact a sealed segment once this fraction of it is dead. */
  compactDeadFraction: number;
  /** Flush a group once it holds this many bytes, without waiting for the next loop turn. */
  flushBytes: number;
}

interface QueuedAppend {
  pieces: readonly Uint8Array[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

class Segment {
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
  readonly ids = new Set<number>();
  queue: QueuedAppend[] = [];
  queueBytes = 0;
  queueStart = 0;
  flushing = false;
  scheduled = false;
  constructor(
    readonly dir: number,
    readonly path: string,
    readonly handle: Promise<FileHandle>,
  ) {}
}

export interface Placement {
  readonly segment: Segment;
  readonly offset: number;
  readonly length: number;
}

/** A placement whose file stays open until `release`, even if compaction moves the value. */
export interface PinnedPlacement {
  readonly handle: Promise<FileHandle>;
  readonly offset: number;
  readonly length: number;
  release(): void;
}

/** Bytes read per step when compaction copies live values out of a segment. */
const COMPACT_WINDOW_BYTES = 4 * 1024 * 1024;

export class SegmentStore {
  private readonly active: (Segment | undefined)[];
  private readonly placements = new Map<number, Placement>();
  private readonly segments = new Set<Segment>();
  private readonly unlinks = new Set<Promise<void>>();
  private readonly compactQueue: Segment[] = [];
  private compactRun: Promise<void> | undefined;
  private nextDir = 0;
  private seq = 0;
  private closed = false;
  readonly counters = { segmentsCreated: 0, segmentsDeleted: 0, compactions: 0, compactedBytes: 0, compactionErrors: 0, flushes: 0 };

  constructor(private readonly options: SegmentStoreOptions) {
    this.active = options.directories.map(() => undefined);
  }

  /** Appends a value's stored bytes; resolves once they are in the file and the value is placed. */
  async put(id: number, pieces: readonly Uint8Array[], length: number): Promise<void> {
    if (this.closed) throw new ClosedError('segment store');
    const placement = await this.append(pieces, length);
    const seg = placement.segment;
    if (this.closed) throw new ClosedError('segment store');
    this.place(id, placement);
    seg.pending--;
    this.check(seg);
  }

  /**
   * Appends many values at once: each run of values that fits in one segment is one
   * reservation and one queued append (so one writev, with its neighbours). Per value, in
   * order: fulfilled once placed; rejected with its run's error if that run's flush failed.
   */
  async putMany(items: readonly { id: number; pieces: readonly Uint8Array[]; length: number }[]): Promise<PromiseSettledResult<void>[]> {
    if (this.closed) throw new ClosedError('segment store');
    const runs: { from: number; to: number; placement: Promise<Placement> }[] = [];
    for (let from = 0; from < items.length; ) {
      const seg = this.activeFor(items[from].length);
      const room = this.options.segmentBytes - seg.size;
      let to = from + 1;
      let length = items[from].length;
      while (to < items.length && length + items[to].length <= room) length += items[to++].length;
      const pieces: Uint8Array[] = [];
      for (let i = from; i < to; i++) for (const piece of items[i].pieces) pieces.push(piece);
      runs.push({ from, to, placement: this.enqueue(seg, pieces, length) });
      from = to;
    }
    const settled = await Promise.allSettled(runs.map((r) => r.placement));
    const results: PromiseSettledResult<void>[] = new Array(items.length);
    const closed = new ClosedError('segment store');
    settled.forEach((run, r) => {
      const { from, to } = runs[r];
      if (run.status === 'rejected') {
        for (let i = from; i < to; i++) results[i] = { status: 'rejected', reason: run.reason };
        return;
      }
      const { segment, offset } = run.value;
      let at = offset;
      for (let i = from; i < to; i++) {
        if (this.closed) results[i] = { status: 'rejected', reason: closed };
        else {
          this.place(items[i].id, { segment, offset: at, length: items[i].length });
          results[i] = { status: 'fulfilled', value: undefined };
        }
        at += items[i].length;
      }
      segment.pending--;
      this.check(segment);
    });
    return results;
  }

  has(id: number): boolean {
    return this.placements.has(id);
  }

  /** Pins the value's segment so its file stays open while the caller reads. */
  pin(id: number): PinnedPlacement | undefined {
    const p = this.placements.get(id);
    if (p === undefined) return undefined;
    const seg = p.segment;
    seg.readers++;
    let released = false;
    return {
      handle: seg.handle,
      offset: p.offset,
      length: p.length,
      release: () => {
        if (released) return;
        released = true;
        this.unpin(seg);
      },
    };
  }

  /** Forgets a value; its bytes become dead space (reclaimed by deletion or compaction). */
  remove(id: number): boolean {
    const p = this.placements.get(id);
    if (p === undefined) return false;
    this.unplace(id, p);
    this.check(p.segment);
    return true;
  }

  /** Bytes of all segment files (live, dead and queued). */
  fileBytes(): number {
    let total = 0;
    for (const seg of this.segments) total += seg.size;
    return total;
  }

  /** Every segment file with its size and live values (diagnostics and tests). */
  list(): { path: string; bytes: number; liveValues: number; liveBytes: number }[] {
    return [...this.segments].map((seg) => ({ path: seg.path, bytes: seg.size, liveValues: seg.liveCount, liveBytes: seg.liveBytes }));
  }

  segmentCount(): number {
    return this.segments.size;
  }

  /** Resolves once no compaction is queued or running and deleted segment files are gone. */
  async idle(): Promise<void> {
    while (this.compactRun !== undefined || this.unlinks.size > 0) {
      await this.compactRun;
      await Promise.all(this.unlinks);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.compactQueue.length = 0;
    await this.compactRun?.catch(() => undefined);
    const handles = [...this.segments].map((seg) => seg.handle.then((h) => h.close()).catch(() => undefined));
    this.segments.clear();
    this.placements.clear();
    await Promise.all([...handles, ...this.unlinks]);
  }

  private place(id: number, p: Placement): void {
    this.placements.set(id, p);
    p.segment.ids.add(id);
    p.segment.liveCount++;
    p.segment.liveBytes += p.length;
  }

  private unplace(id: number, p: Placement): void {
    this.placements.delete(id);
    p.segment.ids.delete(id);
    p.segment.liveCount--;
    p.segment.liveBytes -= p.length;
  }

  /** Reserves space in the next directory's active segment and queues the bytes for it. */
  private append(pieces: readonly Uint8Array[], length: number): Promise<Placement> {
    return this.enqueue(this.activeFor(length), pieces, length);
  }

  /** The next directory's active segment, sealed and replaced if `length` would overflow it. */
  private activeFor(length: number): Segment {
    const dir = this.nextDir++ % this.active.length;
    let seg = this.active[dir];
    if (seg !== undefined && seg.size > 0 && seg.size + length > this.options.segmentBytes) {
      this.seal(seg);
      seg = undefined;
    }
    return seg ?? this.create(dir);
  }

  /** Reserves `length` bytes at the end of `segment` and queues them for its next flush. */
  private enqueue(segment: Segment, pieces: readonly Uint8Array[], length: number): Promise<Placement> {
    const offset = segment.size;
    if (segment.queue.length === 0) segment.queueStart = offset;
    segment.size += length;
    segment.pending++;
    return new Promise<void>((resolve, reject) => {
      segment.queue.push({ pieces, resolve, reject });
      segment.queueBytes += length;
      this.schedule(segment);
    }).then(
      () => ({ segment, offset, length }),
      (err: unknown) => {
        segment.pending--;
        this.check(segment);
        throw err;
      },
    );
  }

  private create(dir: number): Segment {
    const file = path.join(this.options.directories[dir], `segment-${this.seq++}.spws`);
    // 'wx+': read and write, and never reuse a file that is already there.
    const handle = fsp.open(file, 'wx+');
    handle.catch(() => undefined);
    const seg = new Segment(dir, file, handle);
    this.active[dir] = seg;
    this.segments.add(seg);
    this.counters.segmentsCreated++;
    return seg;
  }

  private seal(seg: Segment): void {
    seg.sealed = true;
    if (this.active[seg.dir] === seg) this.active[seg.dir] = undefined;
    this.check(seg);
  }

  /** Flushes now if the group is big, else on the next loop turn so concurrent appends join it. */
  private schedule(seg: Segment): void {
    if (seg.flushing || seg.scheduled) return;
    if (seg.queueBytes >= this.options.flushBytes) {
      void this.flush(seg);
      return;
    }
    seg.scheduled = true;
    setImmediate(() => {
      seg.scheduled = false;
      void this.flush(seg);
    });
  }

  private async flush(seg: Segment): Promise<void> {
    if (seg.flushing || seg.queue.length === 0) return;
    seg.flushing = true;
    const group = seg.queue;
    const start = seg.queueStart;
    seg.queue = [];
    seg.queueBytes = 0;
    try {
      const handle = await seg.handle;
      await writeFully(handle, group.flatMap((a) => a.pieces), start);
      this.counters.flushes++;
      for (const a of group) a.resolve();
    } catch (err) {
      for (const a of group) a.reject(err);
    } finally {
      seg.flushing = false;
      if (seg.queue.length > 0) this.schedule(seg);
    }
  }

  /** Deletes a segment nobody needs, or queues a compaction if it is mostly dead. */
  private check(seg: Segment): void {
    if (seg.retired || seg.compacting || seg.pending > 0) return;
    if (seg.liveCount === 0) {
      this.retire(seg);
      return;
    }
    const dead = seg.size - seg.liveBytes;
    const due = !seg.compactQueued && Date.now() >= seg.compactRetryAt;
    if (seg.sealed && !this.closed && due && dead >= seg.size * this.options.compactDeadFraction) {
      seg.compactQueued = true;
      this.compactQueue.push(seg);
      this.compactRun ??= this.runCompactions().finally(() => (this.compactRun = undefined));
    }
  }

  private retire(seg: Segment): void {
    seg.retired = true;
    if (this.active[seg.dir] === seg) this.active[seg.dir] = undefined;
    this.segments.delete(seg);
    this.counters.segmentsDeleted++;
    // Unlink now; a pinned reader keeps its open descriptor and finishes its read.
    const unlink = fsp
      .unlink(seg.path)
      .catch(ignoreMissing)
      .catch(() => undefined)
      .finally(() => this.unlinks.delete(unlink));
    this.unlinks.add(unlink);
    if (seg.readers === 0) void seg.handle.then((h) => h.close()).catch(() => undefined);
  }

  private unpin(seg: Segment): void {
    seg.readers--;
    if (seg.retired && seg.readers === 0) void seg.handle.then((h) => h.close()).catch(() => undefined);
  }

  private async runCompactions(): Promise<void> {
    for (let seg = this.compactQueue.shift(); seg !== undefined && !this.closed; seg = this.compactQueue.shift()) {
      seg.compactQueued = false;
      if (seg.retired) continue;
      await this.compact(seg).catch(() => this.counters.compactionErrors++);
    }
  }

  /** Copies a segment's live values to active segments, window by window, then drops it. */
  private async compact(seg: Segment): Promise<void> {
    seg.compacting = true;
    seg.readers++;
    try {
      const live = [...seg.ids]
        .map((id) => ({ id, p: this.placements.get(id) }))
        .filter((v): v is { id: number; p: Placement } => v.p?.segment === seg)
        .sort((a, b) => a.p.offset - b.p.offset);
      const handle = await seg.handle;
      // One window buffer for the whole segment: each window's moves are written (awaited)
      // before the next read fills it again.
      let buffer: Buffer | undefined;
      for (let i = 0; i < live.length && !this.closed; ) {
        let j = i + 1;
        while (j < live.length && live[j].p.offset + live[j].p.length - live[i].p.offset <= COMPACT_WINDOW_BYTES) j++;
        const base = live[i].p.offset;
        const span = live[j - 1].p.offset + live[j - 1].p.length - base;
        if (buffer === undefined || buffer.byteLength < span) buffer = Buffer.allocUnsafe(Math.max(span, COMPACT_WINDOW_BYTES));
        const window = buffer.subarray(0, span);
        await readFully(handle, window, 0, span, base);
        await Promise.all(live.slice(i, j).map(({ id, p }) => this.move(id, p, window.subarray(p.offset - base, p.offset - base + p.length))));
        i = j;
      }
      this.counters.compactions++;
    } catch (err) {
      seg.compactRetryAt = Date.now() + 1000;
      throw err;
    } finally {
      seg.compacting = false;
      this.unpin(seg);
      this.check(seg);
    }
  }

  private async move(id: number, from: Placement, bytes: Uint8Array): Promise<void> {
    // Deleted since the window was read: nothing to copy.
    if (this.placements.get(id) !== from) return;
    const to = await this.append([bytes], bytes.byteLength);
    to.segment.pending--;
    if (!this.closed && this.placements.get(id) === from) {
      this.unplace(id, from);
      this.place(id, to);
      this.counters.compactedBytes += bytes.byteLength;
    }
    this.check(to.segment);
  }
}
