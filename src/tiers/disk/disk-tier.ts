import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { ClosedError, InvalidArgumentError, SpillwayError, TierDuplicateIdError, TierMissingError, TierNotOpenError, TierWriteCancelledError } from '../../errors.js';
import { MiB, clampRange, collectPieces, packSmall, streamOf, type CompressionMode, type StoredChunk } from '../chunks.js';
import { BatchWrites } from './batch-writes.js';
import { DiskCatalog, DiskRecord, compressedOnly } from './catalog.js';
import { HeldIds } from './held-ids.js';
import { readValue, streamRange, writeValueFile, type StoredBytes } from './value-files.js';
import { ignoreMissing } from './file-io.js';
import { lz4 } from '../../native.js';
import { BufferPool } from './buffer-pool.js';
import { writePacked, type PackedWrites } from '../packed.js';
import { ReadCoalescer } from './read-coalescer.js';
import { SegmentStore, type SegmentFile } from './segment-store.js';
import { TierCounters } from '../stats.js';
import { resolveDiskOptions, type DiskTierOptions } from './options.js';
import type { ByteRange, Tier, TierStats, TierUsage, WriteItem, WriteResults, WriteSource } from '../tier.js';
import { WriteTracker, checkId } from '../validate.js';
import { FolderOwner } from '../../folders/owner.js';
import { reclaimStaleFolders, type ReclaimReport } from '../../folders/reclaim.js';

export type { DiskTierOptions } from './options.js';

interface Written {
  record: DiskRecord;
  /** Every chunk written (empty when compression is off). */
  chunks: StoredChunk[];
}

/** Fused values up to this size are read through the coalescer; larger ones in slices, hashed as they land. */
const COALESCE_BYTES = 256 * 1024;

/** Stream buffers kept for reuse: enough for the transfer server's concurrent sends. */
const STREAM_SPARE_BUFFERS = 8;

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
  private readonly segmentLanes: number;
  private readonly directWrites: boolean;
  private readonly readSliceBytes: number;
  /** Buffers that read streams fill and their consumers hand back. */
  private readonly streamBuffers: BufferPool;
  private dirs: string[] | undefined;
  private owners: FolderOwner[] = [];
  /** What `open()` reclaimed in each parent: folders of Spillway processes that died without removing them. */
  reclaimed: ReclaimReport[] = [];
  private segments: SegmentStore | undefined;
  /** What the tier holds, and its totals. */
  private readonly catalog = new DiskCatalog();
  /** Single writes in flight (writeMany's fused items are `Writing` in the catalog instead). */
  private readonly writes = new WriteTracker();
  /** Ids held or being written. */
  private readonly held = new HeldIds(this.catalog, this.writes);
  private readonly counters = new TierCounters();
  private readonly reads = new ReadCoalescer();
  /** writeMany and packed batches, and the calls of them in flight. */
  private readonly batches: BatchWrites;
  private nextDir = 0;
  private closed = false;

  /**
   * Many small values at once: see `Tier.writeMany`. Only when fusing is on: the small
   * items of a call share one reservation and one `writev` per segment run. With
   * `smallValueBytes: 0` every value needs a file of its own anyway, so the tier offers
   * nothing cheaper than one `write` each and leaves this undefined.
   */
  readonly writeMany?: (items: readonly WriteItem[]) => Promise<WriteResults>;
  /** The store's packed batches (packed.ts): only with fusing on and no compression. */
  readonly [writePacked]?: PackedWrites;

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
    this.segmentLanes = o.segmentLanes;
    this.directWrites = o.directWrites;
    this.readSliceBytes = o.readSliceBytes;
    this.streamBuffers = new BufferPool(o.streamChunkBytes, STREAM_SPARE_BUFFERS);
    this.batches = new BatchWrites(this, o, this.catalog, this.counters, this.held);
    if (this.smallValueBytes > 0) this.writeMany = (items) => this.batches.writeMany(items, this.segments);
    if (this.smallValueBytes > 0 && this.compression === 'none') {
      this[writePacked] = { maxBatchBytes: this.segmentBytes, valueBytesBelow: this.smallValueBytes, write: (batch) => this.batches.writePacked(batch, this.segments) };
    }
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
    // A missing lz4 binding fails here, with NativeModuleError, rather than at the first spill.
    if (this.compression !== 'none') lz4();
    const owners: FolderOwner[] = [];
    try {
      for (const parent of this.parents) {
        // Folders left by Spillway processes that died (SIGKILL, the OOM killer) go first.
        const report = await reclaimStaleFolders(parent);
        if (report.folders.length > 0) this.reclaimed.push(report);
        owners.push(await FolderOwner.create(parent, 'spillway-'));
      }
    } catch (err) {
      // A later parent failed: the folders already made are ours, and nothing else removes them.
      await Promise.all(owners.map((owner) => owner.release()));
      throw err;
    }
    this.owners = owners;
    const dirs = owners.map((owner) => owner.directory);
    this.dirs = dirs;
    this.segments = new SegmentStore(
      {
        directories: dirs,
        segmentBytes: this.segmentBytes,
        compactDeadFraction: this.compactDeadFraction,
        lanes: this.segmentLanes,
        flushBytes: 4 * MiB,
        directWrites: this.directWrites,
      },
      this.catalog.fused,
    );
  }

  /** The file holding a value (its own, or its segment's); for tests and diagnostics. */
  pathOf(id: number): string {
    return this.catalog.records.get(id)?.file ?? this.segments?.pathOf(id) ?? path.join(this.directory, `${id}.spw`);
  }

  async write(id: number, source: WriteSource, byteLength: number): Promise<void> {
    if (this.closed) throw new ClosedError(`tier "${this.name}"`);
    checkId(id, byteLength);
    if (this.held.taken(id)) throw new TierDuplicateIdError(this.name, id);
    const segments = this.openSegments();
    const elapsed = TierCounters.timer();
    const job = this.writes.begin(this.name, id);
    try {
      const { record, chunks } =
        byteLength < this.smallValueBytes
          ? await this.writeFused(id, source, byteLength, segments, job)
          : await this.writeFile(id, source, byteLength, job);
      this.catalog.add(id, record);
      this.counters.recordChunks(chunks);
      this.counters.recordWrite(elapsed(), byteLength, record.stored);
    } catch (err) {
      this.counters.recordFailedWrite(elapsed());
      throw err;
    } finally {
      this.writes.end(id);
    }
  }

  async read(id: number, onChunk?: (chunk: Uint8Array) => void): Promise<Uint8Array> {
    const record = this.get(id);
    // allocUnsafeSlow: a buffer of its own, so offset 0 is aligned for any typed array.
    const out = Buffer.allocUnsafeSlow(record.size);
    await this.readRecord(id, record, out, onChunk);
    return out;
  }

  async readInto(id: number, out: Uint8Array): Promise<void> {
    const record = this.get(id);
    if (out.byteLength !== record.size) throw new InvalidArgumentError(`readInto needs a buffer of the value's ${record.size} bytes, got ${out.byteLength}`);
    await this.readRecord(id, record, Buffer.from(out.buffer, out.byteOffset, out.byteLength));
  }

  createReadStream(id: number, range?: ByteRange): Readable {
    // Chunks come from the tier's pool and go back to it when the consumer recycles them
    // (see Tier.createReadStream), so serving many small values allocates nothing.
    const pool = this.streamBuffers;
    const produce = async function* (this: DiskTier): AsyncGenerator<Uint8Array> {
      const record = this.get(id);
      const { start, end } = clampRange(record.size, range);
      if (end === start) return;
      const elapsed = TierCounters.timer();
      const { stored, release } = await this.openStored(id, record);
      try {
        yield* streamRange(stored, record.table, start, end, pool.bufferBytes, (bytes) => pool.take(bytes));
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
    const { catalog } = this;
    if (catalog.isWriting(id)) {
      // In a writeMany call in flight: it removes what it wrote and fails the value.
      await this.batches.cancel(id);
      return;
    }
    // Unplaced while its slot still says where it is.
    if (catalog.fused.has(id)) this.segments?.remove(id);
    const gone = catalog.forget(id);
    if (gone === undefined) return;
    this.counters.deletes++;
    if (gone.file !== undefined) await fsp.unlink(gone.file).catch(ignoreMissing);
  }

  usage(): TierUsage {
    return { count: this.catalog.count, bytes: this.catalog.stored };
  }

  stats(): TierStats {
    const seg = this.segments;
    const { fileValues, fusedValues, count, stored, logical } = this.catalog;
    return this.counters.snapshot(
      { count, bytes: stored, logicalBytes: logical },
      {
        fusedValues,
        fileValues,
        segmentFiles: seg?.segmentCount() ?? 0,
        segmentFileBytes: seg?.fileBytes() ?? 0,
        ...(seg?.counters ?? {}),
        // 1 while segment groups are written past the page cache (docs/tiers.md, direct writes).
        directWrites: seg?.direct.on === true ? 1 : 0,
        readCalls: this.reads.calls,
        coalescedReads: this.reads.coalesced,
        readAheadHits: this.reads.windowHits,
        compressedChunks: this.counters.compressedChunks,
        rawChunks: this.counters.rawChunks,
        directories: this.parents.length,
      },
    );
  }

  /** Why segment groups are not written direct though `directWrites` asked for it (after open), if so. */
  get directWritesOffReason(): string | undefined {
    return this.segments?.direct.offBecause;
  }

  /**
   * The segment files with their live values (diagnostics and tests).
   * @internal
   */
  segmentFiles(): SegmentFile[] {
    return this.segments?.list() ?? [];
  }

  /** Resolves once background compaction has finished (for tests and benchmarks). */
  async idle(): Promise<void> {
    await this.segments?.idle();
  }

  async close(): Promise<void> {
    this.closed = true;
    const batchesEnded = this.batches.close();
    await this.writes.cancelAll();
    await batchesEnded;
    await this.segments?.close();
    this.reads.clear();
    this.catalog.clear();
    await Promise.all(this.owners.map((owner) => owner.release()));
  }

  private owned(): string[] {
    if (this.dirs === undefined) throw new TierNotOpenError(this.name);
    return this.dirs;
  }

  private openSegments(): SegmentStore {
    if (this.segments === undefined) throw new TierNotOpenError(this.name);
    return this.segments;
  }

  private get(id: number): DiskRecord {
    const record = this.catalog.locate(id);
    if (record === undefined) throw new TierMissingError(this.name, id);
    return record;
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
    const { fused } = this.catalog;
    fused.add(id, stored);
    try {
      await segments.put(id, pieces);
      err = this.abandoned(id, job);
      if (err !== undefined) {
        segments.remove(id);
        throw err;
      }
    } catch (e) {
      fused.delete(id);
      throw e;
    }
    return { record: new DiskRecord(byteLength, stored, compressedOnly(table), undefined), chunks: table };
  }

  /** Large value: a file of its own in the next directory, written as the source yields. */
  private async writeFile(id: number, source: WriteSource, byteLength: number, job: { readonly cancelled: boolean }): Promise<Written> {
    const dirs = this.owned();
    const file = path.join(dirs[this.nextDir++ % dirs.length], `${id}.spw`);
    const { stored, table } = await writeValueFile(file, source, byteLength, this.compression, this.chunkBytes, () => this.abandoned(id, job));
    return { record: new DiskRecord(byteLength, stored, compressedOnly(table), file), chunks: table };
  }

  /** Reads the whole of `record` into `out` (its size). */
  private async readRecord(id: number, record: DiskRecord, out: Buffer, onChunk?: (chunk: Uint8Array) => void): Promise<void> {
    const elapsed = TierCounters.timer();
    if (record.file === undefined && record.table === undefined && record.size <= COALESCE_BYTES) {
      await this.readFused(id, out);
      this.counters.recordRead(elapsed(), record.size);
      onChunk?.(out);
      return;
    }
    const { stored, release } = await this.openStored(id, record);
    try {
      await readValue(stored, record.table, out, this.readSliceBytes, onChunk);
      this.counters.recordRead(elapsed(), record.size);
    } finally {
      await release();
    }
  }

  /** A small uncompressed fused value into `out`, read with its neighbours when wanted too. */
  private async readFused(id: number, out: Buffer): Promise<void> {
    const pin = this.segments?.pin(id);
    if (pin === undefined) throw new TierMissingError(this.name, id);
    try {
      await this.reads.read(pin.handle, out, pin.offset, pin.finalEnd);
    } finally {
      pin.release();
    }
  }

  /** Opens what holds a value's bytes; `release` closes the file or unpins the segment. */
  private async openStored(id: number, record: DiskRecord): Promise<{ stored: StoredBytes; release: () => Promise<void> }> {
    if (record.file !== undefined) {
      const handle = await fsp.open(record.file, 'r');
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
