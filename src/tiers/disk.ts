import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { ClosedError, SpillwayError, TierDuplicateIdError, TierMissingError, TierNotOpenError, TierWriteCancelledError } from '../errors.js';
import { MiB, clampRange, collectPieces, lengthError, oneBatch, packSmall, streamOf, type CompressionMode, type Packed, type StoredChunk } from './chunks.js';
import { readValue, streamRange, writeValueFile, type StoredBytes } from './disk-io.js';
import { ignoreMissing } from './file-io.js';
import { BufferPool } from './buffer-pool.js';
import { SegmentStore, type Placed, type Segment, type SegmentFile } from './segments.js';
import { TierCounters } from './stats.js';
import { resolveDiskOptions, type DiskTierOptions } from './disk-options.js';
import type { ByteRange, Tier, TierStats, TierUsage, WriteItem, WriteResults, WriteSource } from './tier.js';
import { WriteTracker, checkId } from './validate.js';

export type { DiskTierOptions } from './disk-options.js';

/** The tier's record of a value; a fused one also carries its place in a segment. */
class Entry implements Placed {
  segment: Segment | undefined = undefined;
  offset = 0;
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
  private readonly entries = new Map<number, Entry>();
  private readonly writes = new WriteTracker();
  private readonly counters = new TierCounters();
  private nextDir = 0;
  /** Values with a file of their own (the rest are fused). */
  private fileValues = 0;
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
    this.segments = new SegmentStore({
      directories: dirs,
      segmentBytes: this.segmentBytes,
      compactDeadFraction: this.compactDeadFraction,
      flushBytes: 4 * MiB,
    });
  }

  /** The file holding a value (its own, or its segment's); for tests and diagnostics. */
  pathOf(id: number): string {
    const entry = this.entries.get(id);
    return entry?.file ?? path.join(this.directory, `${id}.spw`);
  }

  async write(id: number, source: WriteSource, byteLength: number): Promise<void> {
    if (this.closed) throw new ClosedError(`tier "${this.name}"`);
    checkId(id, byteLength);
    if (this.entries.has(id)) throw new TierDuplicateIdError(this.name, id);
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
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    this.entries.delete(id);
    this.stored -= entry.stored;
    this.logical -= entry.size;
    this.counters.deletes++;
    if (entry.file === undefined) this.segments?.remove(entry);
    else {
      this.fileValues--;
      await fsp.unlink(entry.file).catch(ignoreMissing);
    }
  }

  usage(): TierUsage {
    return { count: this.entries.size, bytes: this.stored };
  }

  stats(): TierStats {
    const seg = this.segments;
    const fileValues = this.fileValues;
    return this.counters.snapshot(
      { count: this.entries.size, bytes: this.stored, logicalBytes: this.logical },
      {
        fusedValues: this.entries.size - fileValues,
        fileValues,
        segmentFiles: seg?.segmentCount() ?? 0,
        segmentFileBytes: seg?.fileBytes() ?? 0,
        ...(seg?.counters ?? {}),
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
    await this.segments?.close();
    this.entries.clear();
    this.fileValues = 0;
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

  /** Makes a written value visible. */
  private add(id: number, entry: Entry): void {
    this.entries.set(id, entry);
    this.stored += entry.stored;
    this.logical += entry.size;
    if (entry.file !== undefined) this.fileValues++;
  }

  private get(id: number): Entry {
    const entry = this.entries.get(id);
    if (entry === undefined) throw new TierMissingError(this.name, id);
    return entry;
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
    const entry = new Entry(byteLength, stored, compressedOnly(table), undefined);
    await segments.put(entry, pieces);
    err = this.abandoned(id, job);
    if (err !== undefined) {
      segments.remove(entry);
      throw err;
    }
    return { entry, chunks: table };
  }

  /**
   * writeMany: small items are validated and packed one by one (a bad item fails alone),
   * then appended together; large items are written as `write` would, concurrently. The
   * fused items are kept in parallel arrays, not an object each: this is the per-value
   * path of spilling many small values.
   */
  private async writeBatch(items: readonly WriteItem[]): Promise<WriteResults> {
    if (this.closed) throw new ClosedError(`tier "${this.name}"`);
    const segments = this.openSegments();
    const elapsed = TierCounters.timer();
    const results: WriteResults = new Array(items.length);
    const files: Promise<void>[] = [];
    // Per fused item: its index in `items`, its record, its write job, its pieces.
    const indexes: number[] = [];
    const records: Entry[] = [];
    const jobs: { readonly cancelled: boolean }[] = [];
    const pieces: (readonly Uint8Array[])[] = [];
    // Every item is registered before the first await, so a delete that follows this call
    // finds its write and cancels it, as with `write`.
    for (let i = 0; i < items.length; i++) {
      const { id, bytes, byteLength } = items[i];
      if (byteLength >= this.smallValueBytes) {
        files.push(this.write(id, oneBatch(bytes), byteLength).then(fulfilled, rejected).then((r) => void (results[i] = r)));
        continue;
      }
      try {
        checkId(id, byteLength);
        if (this.entries.has(id)) throw new TierDuplicateIdError(this.name, id);
        let total = 0;
        for (const piece of bytes) total += piece.byteLength;
        if (total !== byteLength) throw lengthError(total, byteLength);
        jobs.push(this.writes.begin(this.name, id));
        indexes.push(i);
        records.push(new Entry(byteLength, byteLength, undefined, undefined));
        pieces.push(bytes);
      } catch (err) {
        this.counters.recordFailedWrite(0);
        results[i] = rejected(err);
      }
    }
    const tables = this.compression === 'none' ? undefined : await this.packBatch(items, indexes, records, jobs, pieces, results);
    let failures: unknown[];
    try {
      failures = await segments.putMany(records, pieces);
    } catch (err) {
      failures = records.map(() => err);
    }
    const share = records.length > 0 ? elapsed() / records.length : 0;
    for (let k = 0; k < records.length; k++) {
      const i = indexes[k];
      const { id } = items[i];
      const entry = records[k];
      let failure = failures[k];
      if (failure === undefined) {
        failure = this.abandoned(id, jobs[k]);
        if (failure !== undefined) segments.remove(entry);
      }
      if (failure === undefined) {
        this.add(id, entry);
        if (tables !== undefined) this.counters.recordChunks(tables[k]);
        this.counters.recordWrite(share, entry.size, entry.stored);
        results[i] = FULFILLED;
      } else {
        this.counters.recordFailedWrite(share);
        results[i] = rejected(failure);
      }
      this.writes.end(id);
    }
    await Promise.all(files);
    return results;
  }

  /**
   * Compresses a batch's fused items in place (records and pieces replaced by their packed
   * form); an item that fails to pack fails alone and leaves the arrays. Returns each
   * remaining item's chunk table.
   */
  private async packBatch(
    items: readonly WriteItem[],
    indexes: number[],
    records: Entry[],
    jobs: { readonly cancelled: boolean }[],
    pieces: (readonly Uint8Array[])[],
    results: WriteResults,
  ): Promise<StoredChunk[][]> {
    const tables: StoredChunk[][] = [];
    let kept = 0;
    for (let k = 0; k < records.length; k++) {
      const i = indexes[k];
      try {
        const packed: Packed = await packSmall(pieces[k], records[k].size, this.compression, this.chunkBytes);
        indexes[kept] = i;
        jobs[kept] = jobs[k];
        records[kept] = new Entry(records[k].size, packed.stored, compressedOnly(packed.table), undefined);
        pieces[kept] = packed.pieces;
        tables[kept] = packed.table;
        kept++;
      } catch (err) {
        this.counters.recordFailedWrite(0);
        results[i] = rejected(err);
        this.writes.end(items[i].id);
      }
    }
    indexes.length = records.length = jobs.length = pieces.length = kept;
    return tables;
  }

  /** Large value: a file of its own in the next directory, written as the source yields. */
  private async writeFile(id: number, source: WriteSource, byteLength: number, job: { readonly cancelled: boolean }): Promise<Written> {
    const dirs = this.owned();
    const file = path.join(dirs[this.nextDir++ % dirs.length], `${id}.spw`);
    const { stored, table } = await writeValueFile(file, source, byteLength, this.compression, this.chunkBytes, () => this.abandoned(id, job));
    return { entry: new Entry(byteLength, stored, compressedOnly(table), file), chunks: table };
  }

  /** Opens what holds a value's bytes; `release` closes the file or unpins the segment. */
  private async openStored(id: number, entry: Entry): Promise<{ stored: StoredBytes; release: () => Promise<void> }> {
    if (entry.file !== undefined) {
      const handle = await fsp.open(entry.file, 'r');
      return { stored: { handle, base: 0 }, release: () => handle.close() };
    }
    const pin = this.segments?.pin(entry);
    if (pin === undefined) throw new TierMissingError(this.name, id);
    try {
      return { stored: { handle: await pin.handle, base: pin.offset }, release: async () => pin.release() };
    } catch (err) {
      pin.release();
      throw err;
    }
  }
}
