import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { ClosedError, SpillwayError, TierDuplicateIdError, TierMissingError, TierNotOpenError, TierWriteCancelledError } from '../errors.js';
import { MiB, clampRange, collectPieces, lengthError, oneBatch, packSmall, streamOf, type CompressionMode, type Packed, type StoredChunk } from './chunks.js';
import { readValue, streamRange, writeValueFile, type StoredBytes } from './disk-io.js';
import { ignoreMissing } from './file-io.js';
import { BufferPool } from './buffer-pool.js';
import { Placements, SlotState } from './placements.js';
import { ReadCoalescer } from './read-coalescer.js';
import { SegmentStore, type SegmentFile } from './segments.js';
import { TierCounters } from './stats.js';
import { resolveDiskOptions, type DiskTierOptions } from './disk-options.js';
import type { ByteRange, Tier, TierStats, TierUsage, WriteItem, WriteResults, WriteSource } from './tier.js';
import { WriteTracker, checkId } from './validate.js';

export type { DiskTierOptions } from './disk-options.js';

/**
 * What a read needs to know of a value. Kept (in `records`) only for values with a file of
 * their own or compressed chunks; a plain fused value is all in `Placements`.
 */
class Entry {
  constructor(
    readonly size: number,
    readonly stored: number,
    /** Chunk layout when at least one chunk is compressed; undefined: the bytes are stored as is. */
    readonly table: StoredChunk[] | undefined,
    /** The value's own file, or undefined when it lives in a segment. */
    readonly file: string | undefined,
  ) {}
}

interface Written {
  entry: Entry;
  /** Every chunk written (empty when compression is off). */
  chunks: StoredChunk[];
}

/** Fused values up to this size are read through the coalescer; larger ones in slices, hashed as they land. */
const COALESCE_BYTES = 256 * 1024;

/** Stream buffers kept for reuse: enough for the transfer server's concurrent sends. */
const STREAM_SPARE_BUFFERS = 8;

/** One frozen result for every value written: a batch of 1024 values allocates none. */
const FULFILLED: PromiseSettledResult<void> = Object.freeze({ status: 'fulfilled', value: undefined });
const fulfilled = (): PromiseSettledResult<void> => FULFILLED;
const rejected = (reason: unknown): PromiseSettledResult<void> => ({ status: 'rejected', reason });

/** A table is only needed when some chunk is compressed; otherwise the bytes are the value. */
function compressedOnly(table: StoredChunk[]): StoredChunk[] | undefined {
  return table.some((c) => c.compressed) ? table : undefined;
}

/**
 * Values on local disks. Large values get a file each, named by the store's numeric id
 * (never by the key); small ones are fused into segment files. Every folder is fresh and
 * used only by this tier, so stores can share parent directories safely.
 */
export class DiskTier implements Tier {
  readonly name: string;
  readonly capacity: number;
  readonly compression: CompressionMode;
  private readonly parents: string[];
  private readonly chunkBytes: number;
  private readonly smallValueBytes: number;
  private readonly segmentBytes: number;
  private readonly compactDeadFraction: number;
  private readonly readSliceBytes: number;
  /** Buffers that read streams fill and their consumers hand back. */
  private readonly streamBuffers: BufferPool;
  private dirs: string[] | undefined;
  private segments: SegmentStore | undefined;
  /** Where fused values are (every fused value, compressed or not). */
  private readonly fused = new Placements();
  /** Values with a file of their own or a chunk table. */
  private readonly records = new Map<number, Entry>();
  /** Single writes in flight (writeMany's fused items are `Writing` in `fused` instead). */
  private readonly writes = new WriteTracker();
  /** writeMany calls in flight, and the ids deleted while one of them was writing them. */
  private readonly batches = new Set<Promise<void>>();
  private readonly cancelled = new Set<number>();
  private readonly counters = new TierCounters();
  private readonly reads = new ReadCoalescer();
  private nextDir = 0;
  /** Values with a file of their own, and fused values. */
  private fileValues = 0;
  private fusedValues = 0;
  private stored = 0;
  private logical = 0;
  private closed = false;

  /**
   * Many small values at once: see `Tier.writeMany`. Only when fusing is on: the small
   * items of a call share one reservation and one `writev` per segment run. With
   * `smallValueBytes: 0` every value needs a file of its own anyway, so the tier offers
   * nothing cheaper than one `write` each and leaves this undefined.
   */
  readonly writeMany?: (items: readonly WriteItem[]) => Promise<WriteResults>;

  constructor(options: DiskTierOptions = {}) {
    const o = resolveDiskOptions(options);
    this.name = o.name;
    this.capacity = o.capacity;
    this.parents = o.parents;
    this.compression = o.compression;
    this.chunkBytes = o.chunkBytes;
    this.smallValueBytes = o.smallValueBytes;
    this.segmentBytes = o.segmentBytes;
    this.compactDeadFraction = o.compactDeadFraction;
    this.readSliceBytes = o.readSliceBytes;
    this.streamBuffers = new BufferPool(o.streamChunkBytes, STREAM_SPARE_BUFFERS);
    if (this.smallValueBytes > 0) this.writeMany = (items) => this.writeBatch(items);
  }

  /** The (first) folder this tier owns (after open). */
  get directory(): string {
    return this.owned()[0];
  }

  /** Every folder this tier owns (after open), one per parent directory. */
  get directories(): readonly string[] {
    return this.owned();
  }

  async open(): Promise<void> {
    if (this.closed) throw new ClosedError(`tier "${this.name}"`);
    const dirs: string[] = [];
    for (const parent of this.parents) {
      await fsp.mkdir(parent, { recursive: true });
      dirs.push(await fsp.mkdtemp(path.join(parent, 'spillway-')));
    }
    this.dirs = dirs;
    this.segments = new SegmentStore(
      {
        directories: dirs,
        segmentBytes: this.segmentBytes,
        compactDeadFraction: this.compactDeadFraction,
        flushBytes: 4 * MiB,
      },
      this.fused,
    );
  }

  /** The file holding a value (its own, or its segment's); for tests and diagnostics. */
  pathOf(id: number): string {
    return this.records.get(id)?.file ?? this.segments?.pathOf(id) ?? path.join(this.directory, `${id}.spw`);
  }

  async write(id: number, source: WriteSource, byteLength: number): Promise<void> {
    if (this.closed) throw new ClosedError(`tier "${this.name}"`);
    checkId(id, byteLength);
    if (this.taken(id)) throw new TierDuplicateIdError(this.name, id);
    const segments = this.openSegments();
    const elapsed = TierCounters.timer();
    const job = this.writes.begin(this.name, id);
    try {
      const { entry, chunks } =
        byteLength < this.smallValueBytes
          ? await this.writeFused(id, source, byteLength, segments, job)
          : await this.writeFile(id, source, byteLength, job);
      this.add(id, entry);
      this.counters.recordChunks(chunks);
      this.counters.recordWrite(elapsed(), byteLength, entry.stored);
    } catch (err) {
      this.counters.recordFailedWrite(elapsed());
      throw err;
    } finally {
      this.writes.end(id);
    }
  }

  async read(id: number, onChunk?: (chunk: Uint8Array) => void): Promise<Uint8Array> {
    const entry = this.get(id);
    const elapsed = TierCounters.timer();
    if (entry.file === undefined && entry.table === undefined && entry.size <= COALESCE_BYTES) {
      const out = await this.readFused(id, entry.size);
      this.counters.recordRead(elapsed(), entry.size);
      onChunk?.(out);
      return out;
    }
    const { stored, release } = await this.openStored(id, entry);
    try {
      // allocUnsafeSlow: a buffer of its own, so offset 0 is aligned for any typed array.
      const out = Buffer.allocUnsafeSlow(entry.size);
      await readValue(stored, entry.table, out, this.readSliceBytes, onChunk);
      this.counters.recordRead(elapsed(), entry.size);
      return out;
    } finally {
      await release();
    }
  }

  createReadStream(id: number, range?: ByteRange): Readable {
    // Chunks come from the tier's pool and go back to it when the consumer recycles them
    // (see Tier.createReadStream), so serving many small values allocates nothing.
    const pool = this.streamBuffers;
    const produce = async function* (this: DiskTier): AsyncGenerator<Uint8Array> {
      const entry = this.get(id);
      const { start, end } = clampRange(entry.size, range);
      if (end === start) return;
      const elapsed = TierCounters.timer();
      const { stored, release } = await this.openStored(id, entry);
      try {
        yield* streamRange(stored, entry.table, start, end, pool.bufferBytes, (bytes) => pool.take(bytes));
        this.counters.recordRead(elapsed(), end - start);
      } finally {
        await release();
      }
    };
    const stream = streamOf(() => produce.call(this));
    return Object.assign(stream, { recycle: (chunk: Uint8Array): void => pool.give(chunk) });
  }

  async delete(id: number): Promise<void> {
    await this.writes.cancel(id);
    const slot = this.fused.slotOf(id);
    if (slot >= 0 && this.fused.state(slot) === SlotState.Writing) {
      // In a writeMany call in flight: it removes what it wrote and fails the value.
      this.cancelled.add(id);
      await Promise.all([...this.batches]);
      this.cancelled.delete(id);
      return;
    }
    const record = this.records.get(id);
    if (slot >= 0) {
      const stored = this.fused.stored(slot);
      this.segments?.remove(id);
      this.fused.delete(id);
      this.records.delete(id);
      this.fusedValues--;
      this.stored -= stored;
      this.logical -= record?.size ?? stored;
      this.counters.deletes++;
      return;
    }
    if (record === undefined) return;
    this.records.delete(id);
    this.fileValues--;
    this.stored -= record.stored;
    this.logical -= record.size;
    this.counters.deletes++;
    if (record.file !== undefined) await fsp.unlink(record.file).catch(ignoreMissing);
  }

  usage(): TierUsage {
    return { count: this.fusedValues + this.fileValues, bytes: this.stored };
  }

  stats(): TierStats {
    const seg = this.segments;
    const { fileValues, fusedValues } = this;
    return this.counters.snapshot(
      { count: fusedValues + fileValues, bytes: this.stored, logicalBytes: this.logical },
      {
        fusedValues,
        fileValues,
        segmentFiles: seg?.segmentCount() ?? 0,
        segmentFileBytes: seg?.fileBytes() ?? 0,
        ...(seg?.counters ?? {}),
        readCalls: this.reads.calls,
        coalescedReads: this.reads.coalesced,
        compressedChunks: this.counters.compressedChunks,
        rawChunks: this.counters.rawChunks,
        directories: this.parents.length,
      },
    );
  }

  /** The segment files with their live values (diagnostics and tests). */
  segmentFiles(): SegmentFile[] {
    return this.segments?.list() ?? [];
  }

  /** Resolves once background compaction has finished (for tests and benchmarks). */
  async idle(): Promise<void> {
    await this.segments?.idle();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.writes.cancelAll();
    await Promise.all([...this.batches]);
    await this.segments?.close();
    this.records.clear();
    this.fused.clear();
    this.cancelled.clear();
    this.fileValues = 0;
    this.fusedValues = 0;
    this.stored = 0;
    this.logical = 0;
    await Promise.all((this.dirs ?? []).map((dir) => fsp.rm(dir, { recursive: true, force: true })));
  }

  private owned(): string[] {
    if (this.dirs === undefined) throw new TierNotOpenError(this.name);
    return this.dirs;
  }

  private openSegments(): SegmentStore {
    if (this.segments === undefined) throw new TierNotOpenError(this.name);
    return this.segments;
  }

  /** The id is stored, or being written. */
  private taken(id: number): boolean {
    return this.fused.has(id) || this.records.has(id) || this.writes.has(id);
  }

  /** Makes a value written by `write` visible. */
  private add(id: number, entry: Entry): void {
    if (entry.file !== undefined) {
      this.records.set(id, entry);
      this.fileValues++;
    } else {
      this.fused.setLive(this.fused.slotOf(id));
      if (entry.table !== undefined) this.records.set(id, entry);
      this.fusedValues++;
    }
    this.stored += entry.stored;
    this.logical += entry.size;
  }

  private get(id: number): Entry {
    const record = this.records.get(id);
    if (record !== undefined) return record;
    const slot = this.fused.slotOf(id);
    if (slot < 0 || this.fused.state(slot) !== SlotState.Live) throw new TierMissingError(this.name, id);
    const stored = this.fused.stored(slot);
    return new Entry(stored, stored, undefined, undefined);
  }

  private abandoned(id: number, job: { readonly cancelled: boolean }): SpillwayError | undefined {
    if (this.closed) return new ClosedError(`tier "${this.name}"`);
    if (job.cancelled) return new TierWriteCancelledError(this.name, id);
    return undefined;
  }

  /** Small value: its pieces, compressed per chunk if enabled, appended to a segment. */
  private async writeFused(id: number, source: WriteSource, byteLength: number, segments: SegmentStore, job: { readonly cancelled: boolean }): Promise<Written> {
    const raw = await collectPieces(source, byteLength);
    const { pieces, stored, table } = await packSmall(raw, byteLength, this.compression, this.chunkBytes);
    let err = this.abandoned(id, job);
    if (err !== undefined) throw err;
    this.fused.add(id, stored);
    try {
      await segments.put(id, pieces);
      err = this.abandoned(id, job);
      if (err !== undefined) {
        segments.remove(id);
        throw err;
      }
    } catch (e) {
      this.fused.delete(id);
      throw e;
    }
    return { entry: new Entry(byteLength, stored, compressedOnly(table), undefined), chunks: table };
  }

  /**
   * writeMany: small items are validated and packed one by one (a bad item fails alone),
   * then appended together; large items are written as `write` would, concurrently. The
   * fused items are kept in parallel arrays and their places in `Placements`, not an
   * object each: this is the per-value path of spilling many small values.
   */
  private writeBatch(items: readonly WriteItem[]): Promise<WriteResults> {
    if (this.closed) return Promise.reject(new ClosedError(`tier "${this.name}"`));
    const run = this.writeFusedBatch(items, this.openSegments());
    // delete() and close() wait for batches in flight: they track their own items.
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.batches.add(settled);
    void settled.then(() => this.batches.delete(settled));
    return run;
  }

  private async writeFusedBatch(items: readonly WriteItem[], segments: SegmentStore): Promise<WriteResults> {
    const elapsed = TierCounters.timer();
    const results: WriteResults = new Array(items.length);
    const files: Promise<void>[] = [];
    // Per fused item: its index in `items`, its id, its slot in `fused`, its pieces.
    const indexes: number[] = [];
    const ids: number[] = [];
    const slots: number[] = [];
    const pieces: (readonly Uint8Array[])[] = [];
    // Every item is registered before the first await, so a delete that follows this call
    // finds it `Writing` and cancels it, as with `write`.
    for (let i = 0; i < items.length; i++) {
      const { id, bytes, byteLength } = items[i];
      if (byteLength >= this.smallValueBytes) {
        files.push(this.write(id, oneBatch(bytes), byteLength).then(fulfilled, rejected).then((r) => void (results[i] = r)));
        continue;
      }
      try {
        checkId(id, byteLength);
        if (this.taken(id)) throw new TierDuplicateIdError(this.name, id);
        let total = 0;
        for (const piece of bytes) total += piece.byteLength;
        if (total !== byteLength) throw lengthError(total, byteLength);
        slots.push(this.fused.add(id, byteLength));
        indexes.push(i);
        ids.push(id);
        pieces.push(bytes);
      } catch (err) {
        this.counters.recordFailedWrite(0);
        results[i] = rejected(err);
      }
    }
    const tables = this.compression === 'none' ? undefined : await this.packBatch(items, indexes, ids, slots, pieces, results);
    let failures: unknown[];
    try {
      failures = await segments.putMany(ids, slots, pieces);
    } catch (err) {
      failures = ids.map(() => err);
    }
    const share = ids.length > 0 ? elapsed() / ids.length : 0;
    let closed: ClosedError | undefined;
    for (let k = 0; k < ids.length; k++) {
      const i = indexes[k];
      const id = ids[k];
      const slot = slots[k];
      const cancelled = this.cancelled.size > 0 && this.cancelled.delete(id);
      let failure = failures[k];
      if (failure === undefined && (this.closed || cancelled)) {
        failure = this.closed ? (closed ??= new ClosedError(`tier "${this.name}"`)) : new TierWriteCancelledError(this.name, id);
        segments.remove(id);
      }
      if (failure === undefined) {
        const size = items[i].byteLength;
        const stored = this.fused.stored(slot);
        this.fused.setLive(slot);
        if (tables !== undefined) {
          const table = compressedOnly(tables[k]);
          if (table !== undefined) this.records.set(id, new Entry(size, stored, table, undefined));
          this.counters.recordChunks(tables[k]);
        }
        this.fusedValues++;
        this.stored += stored;
        this.logical += size;
        this.counters.recordWrite(share, size, stored);
        results[i] = FULFILLED;
      } else {
        this.fused.delete(id);
        this.counters.recordFailedWrite(share);
        results[i] = rejected(failure);
      }
    }
    await Promise.all(files);
    return results;
  }

  /**
   * Compresses a batch's fused items in place (stored lengths and pieces replaced by their
   * packed form); an item that fails to pack fails alone and leaves the arrays. Returns
   * each remaining item's chunk table.
   */
  private async packBatch(
    items: readonly WriteItem[],
    indexes: number[],
    ids: number[],
    slots: number[],
    pieces: (readonly Uint8Array[])[],
    results: WriteResults,
  ): Promise<StoredChunk[][]> {
    const tables: StoredChunk[][] = [];
    let kept = 0;
    for (let k = 0; k < ids.length; k++) {
      const i = indexes[k];
      try {
        const packed: Packed = await packSmall(pieces[k], items[i].byteLength, this.compression, this.chunkBytes);
        this.fused.setStored(slots[k], packed.stored);
        indexes[kept] = i;
        ids[kept] = ids[k];
        slots[kept] = slots[k];
        pieces[kept] = packed.pieces;
        tables[kept] = packed.table;
        kept++;
      } catch (err) {
        this.fused.delete(ids[k]);
        this.counters.recordFailedWrite(0);
        results[i] = rejected(err);
      }
    }
    indexes.length = ids.length = slots.length = pieces.length = kept;
    return tables;
  }

  /** Large value: a file of its own in the next directory, written as the source yields. */
  private async writeFile(id: number, source: WriteSource, byteLength: number, job: { readonly cancelled: boolean }): Promise<Written> {
    const dirs = this.owned();
    const file = path.join(dirs[this.nextDir++ % dirs.length], `${id}.spw`);
    const { stored, table } = await writeValueFile(file, source, byteLength, this.compression, this.chunkBytes, () => this.abandoned(id, job));
    return { entry: new Entry(byteLength, stored, compressedOnly(table), file), chunks: table };
  }

  /** A small uncompressed fused value, read with its neighbours when they are wanted too. */
  private async readFused(id: number, size: number): Promise<Buffer> {
    const pin = this.segments?.pin(id);
    if (pin === undefined) throw new TierMissingError(this.name, id);
    try {
      // allocUnsafeSlow: a buffer of its own, so offset 0 is aligned for any typed array.
      const out = Buffer.allocUnsafeSlow(size);
      await this.reads.read(pin.handle, out, pin.offset);
      return out;
    } finally {
      pin.release();
    }
  }

  /** Opens what holds a value's bytes; `release` closes the file or unpins the segment. */
  private async openStored(id: number, entry: Entry): Promise<{ stored: StoredBytes; release: () => Promise<void> }> {
    if (entry.file !== undefined) {
      const handle = await fsp.open(entry.file, 'r');
      return { stored: { handle, base: 0 }, release: () => handle.close() };
    }
    const pin = this.segments?.pin(id);
    if (pin === undefined) throw new TierMissingError(this.name, id);
    try {
      return { stored: { handle: await pin.handle, base: pin.offset }, release: async () => pin.release() };
    } catch (err) {
      pin.release();
      throw err;
    }
  }
}
