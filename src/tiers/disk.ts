import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { ClosedError, InvalidArgumentError, SpillwayError, TierDuplicateIdError, TierMissingError, TierNotOpenError, TierWriteCancelledError } from '../errors.js';
import {
  DEFAULT_CHUNK_BYTES,
  MAX_CHUNK_BYTES,
  MiB,
  clampRange,
  compressAhead,
  compressChunk,
  gather,
  lengthError,
  pushChunk,
  rechunk,
  streamOf,
  type CompressionMode,
  type StoredChunk,
} from './chunks.js';
import { readValue, streamRange, type StoredBytes } from './disk-io.js';
import { ignoreMissing, writeFully } from './file-io.js';
import { SegmentStore } from './segments.js';
import { TierCounters } from './stats.js';
import type { ByteRange, Tier, TierStats, TierUsage, WriteSource } from './tier.js';
import { WriteTracker, checkId, checkNonNegativeInteger, checkPositive } from './validate.js';

export interface DiskTierOptions {
  /** Parent directory; the tier creates a fresh folder of its own inside it. Default: os.tmpdir(). */
  directory?: string;
  /** Several parents (several disks), used in turn; each gets its own fresh folder. Overrides `directory`. */
  directories?: string[];
  name?: string;
  /** Byte budget for this tier (stored bytes). Default: unlimited. */
  capacity?: number;
  /** Per chunk: `lz4` always, `auto` when a quick probe says it pays, `none` (default) never. */
  compression?: CompressionMode;
  /** Compression unit (default 1 MiB, at most 8 MiB). */
  chunkBytes?: number;
  /** Values smaller than this go to shared segment files (default 1 MiB; 0 disables fusing). */
  smallValueBytes?: number;
  /** Size at which a segment file is sealed and a new one started (default 64 MiB). */
  segmentBytes?: number;
  /** A sealed segment with at least this fraction of dead bytes is compacted (default 0.5). */
  compactDeadFraction?: number;
  /** Bytes per read call when loading a value. */
  readSliceBytes?: number;
  /** Chunk size of streams that serve peers (about 1 MiB is the sweet spot on loopback). */
  streamChunkBytes?: number;
}

interface Entry {
  size: number;
  stored: number;
  /** Chunk layout when at least one chunk is compressed; undefined: the bytes are stored as is. */
  table: StoredChunk[] | undefined;
  /** The value's own file, or undefined when it lives in a segment. */
  file: string | undefined;
}

interface Written {
  entry: Entry;
  /** Every chunk written (empty when compression is off). */
  chunks: StoredChunk[];
}

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
  private readonly streamChunkBytes: number;
  private dirs: string[] | undefined;
  private segments: SegmentStore | undefined;
  private readonly entries = new Map<number, Entry>();
  private readonly writes = new WriteTracker();
  private readonly counters = new TierCounters();
  private nextDir = 0;
  private stored = 0;
  private logical = 0;
  private closed = false;

  constructor(options: DiskTierOptions = {}) {
    this.name = options.name ?? 'disk';
    this.capacity = options.capacity ?? Infinity;
    checkPositive('capacity', this.capacity, true);
    if (options.directories !== undefined) {
      if (!Array.isArray(options.directories) || options.directories.length === 0) {
        throw new InvalidArgumentError('directories must be a non-empty array of paths');
      }
      this.parents = [...options.directories];
    } else {
      this.parents = [options.directory ?? os.tmpdir()];
    }
    for (const dir of this.parents) {
      if (typeof dir !== 'string' || dir === '') throw new InvalidArgumentError(`a directory must be a non-empty string, got ${String(dir)}`);
    }
    this.compression = options.compression ?? 'none';
    if (!['lz4', 'none', 'auto'].includes(this.compression)) {
      throw new InvalidArgumentError(`compression must be 'lz4', 'none' or 'auto', got ${String(this.compression)}`);
    }
    this.chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK_BYTES;
    this.smallValueBytes = options.smallValueBytes ?? MiB;
    this.segmentBytes = options.segmentBytes ?? 64 * MiB;
    this.compactDeadFraction = options.compactDeadFraction ?? 0.5;
    this.readSliceBytes = options.readSliceBytes ?? 8 * MiB;
    this.streamChunkBytes = options.streamChunkBytes ?? MiB;
    checkPositive('chunkBytes', this.chunkBytes);
    if (!Number.isInteger(this.chunkBytes) || this.chunkBytes > MAX_CHUNK_BYTES) {
      throw new InvalidArgumentError(`chunkBytes must be an integer of at most ${MAX_CHUNK_BYTES}, got ${this.chunkBytes}`);
    }
    checkNonNegativeInteger('smallValueBytes', this.smallValueBytes);
    checkPositive('segmentBytes', this.segmentBytes);
    if (this.smallValueBytes > this.segmentBytes) {
      throw new InvalidArgumentError(`smallValueBytes (${this.smallValueBytes}) must not exceed segmentBytes (${this.segmentBytes})`);
    }
    checkPositive('compactDeadFraction', this.compactDeadFraction);
    if (this.compactDeadFraction >= 1) throw new InvalidArgumentError(`compactDeadFraction must be below 1, got ${this.compactDeadFraction}`);
    checkPositive('readSliceBytes', this.readSliceBytes);
    checkPositive('streamChunkBytes', this.streamChunkBytes);
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
      this.entries.set(id, entry);
      this.stored += entry.stored;
      this.logical += entry.size;
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
    // Chunks handed back by the consumer (recycle) are read into again: see Tier.createReadStream.
    const spare: Buffer[] = [];
    const chunkBytes = this.streamChunkBytes;
    const allocate = (bytes: number): Buffer => (spare.pop() ?? Buffer.allocUnsafeSlow(chunkBytes)).subarray(0, bytes);
    const produce = async function* (this: DiskTier): AsyncGenerator<Uint8Array> {
      const entry = this.get(id);
      const { start, end } = clampRange(entry.size, range);
      if (end === start) return;
      const elapsed = TierCounters.timer();
      const { stored, release } = await this.openStored(id, entry);
      try {
        yield* streamRange(stored, entry.table, start, end, chunkBytes, allocate);
        this.counters.recordRead(elapsed(), end - start);
      } finally {
        await release();
      }
    };
    const stream = streamOf(() => produce.call(this));
    return Object.assign(stream, {
      recycle(chunk: Uint8Array): void {
        // Only whole buffers of ours come back into use; at most a few are kept.
        if (chunk.buffer.byteLength === chunkBytes && spare.length < 4 && !(chunk.buffer instanceof SharedArrayBuffer)) {
          spare.push(Buffer.from(chunk.buffer, 0, chunkBytes));
        }
      },
    });
  }

  async delete(id: number): Promise<void> {
    await this.writes.cancel(id);
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    this.entries.delete(id);
    this.stored -= entry.stored;
    this.logical -= entry.size;
    this.counters.deletes++;
    if (entry.file === undefined) this.segments?.remove(id);
    else await fsp.unlink(entry.file).catch(ignoreMissing);
  }

  usage(): TierUsage {
    return { count: this.entries.size, bytes: this.stored };
  }

  stats(): TierStats {
    const seg = this.segments;
    let fileValues = 0;
    for (const e of this.entries.values()) if (e.file !== undefined) fileValues++;
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
  segmentFiles(): { path: string; bytes: number; liveValues: number; liveBytes: number }[] {
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

  /** Small value: gathered, compressed per chunk if enabled, appended to a segment. */
  private async writeFused(id: number, source: WriteSource, byteLength: number, segments: SegmentStore, job: { readonly cancelled: boolean }): Promise<Written> {
    const raw = await gather(source, byteLength);
    let pieces: Buffer[] = [raw];
    const table: StoredChunk[] = [];
    if (this.compression !== 'none' && byteLength > 0) {
      pieces = [];
      for (let at = 0; at < byteLength; at += this.chunkBytes) {
        const chunk = await compressChunk(raw.subarray(at, at + this.chunkBytes), this.compression);
        pushChunk(table, Math.min(this.chunkBytes, byteLength - at), chunk.bytes.byteLength, chunk.compressed);
        pieces.push(chunk.bytes);
      }
    }
    const stored = pieces.reduce((sum, p) => sum + p.byteLength, 0);
    let err = this.abandoned(id, job);
    if (err !== undefined) throw err;
    await segments.put(id, pieces, stored);
    err = this.abandoned(id, job);
    if (err !== undefined) {
      segments.remove(id);
      throw err;
    }
    return { entry: { size: byteLength, stored, table: compressedOnly(table), file: undefined }, chunks: table };
  }

  /** Large value: a file of its own in the next directory, written as the source yields. */
  private async writeFile(id: number, source: WriteSource, byteLength: number, job: { readonly cancelled: boolean }): Promise<Written> {
    const dirs = this.owned();
    const file = path.join(dirs[this.nextDir++ % dirs.length], `${id}.spw`);
    // 'wx': an id is never reused, so an existing file means a bug; never overwrite one.
    const handle = await fsp.open(file, 'wx');
    let position = 0;
    const table: StoredChunk[] = [];
    try {
      if (this.compression === 'none') {
        let inflight: Promise<void> | undefined;
        let total = 0;
        for await (const batch of source) {
          // The producer hashed this batch while the previous one was being written.
          if (inflight !== undefined) await inflight;
          const err = this.abandoned(id, job);
          if (err !== undefined) throw err;
          for (const piece of batch) total += piece.byteLength;
          if (total > byteLength) throw lengthError(total, byteLength);
          inflight = writeFully(handle, batch, position);
          inflight.catch(() => undefined);
          position = total;
        }
        if (inflight !== undefined) await inflight;
        if (total !== byteLength) throw lengthError(total, byteLength);
      } else {
        // The next chunk is compressed while this one is written.
        for await (const chunk of compressAhead(rechunk(source, byteLength, this.chunkBytes), this.compression)) {
          const err = this.abandoned(id, job);
          if (err !== undefined) throw err;
          await writeFully(handle, [chunk.bytes], position);
          pushChunk(table, chunk.raw.byteLength, chunk.bytes.byteLength, chunk.compressed);
          position += chunk.bytes.byteLength;
        }
      }
      await handle.close();
      const err = this.abandoned(id, job);
      if (err !== undefined) throw err;
    } catch (err) {
      await handle.close().catch(() => undefined);
      await fsp.unlink(file).catch(() => undefined);
      throw err;
    }
    return { entry: { size: byteLength, stored: position, table: compressedOnly(table), file }, chunks: table };
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
