import type { Readable } from 'node:stream';
import { ClosedError, InvalidArgumentError, TierDuplicateIdError, TierMissingError, TierWriteCancelledError } from '../errors.js';
import {
  DEFAULT_CHUNK_BYTES,
  MAX_CHUNK_BYTES,
  chunkAt,
  clampRange,
  compressAhead,
  compressChunk,
  decompressChunk,
  lengthError,
  pushChunk,
  rechunk,
  streamOf,
  yieldToLoop,
  type StoredChunk,
} from './chunks.js';
import { Slicer } from '../loop.js';
import { lz4 } from '../native.js';
import { byteOption } from '../units.js';
import { TierCounters } from './stats.js';
import type { ByteRange, Tier, TierStats, TierUsage, WriteItem, WriteResults, WriteSource } from './tier.js';
import { WriteTracker, checkId, checkPositive } from './validate.js';

export interface CompressedMemoryTierOptions {
  /** Byte budget for the compressed bytes held: bytes or a string like '256 MiB' (required: memory is never unlimited). */
  capacity: number | string;
  name?: string;
  /** Compression unit (default 1 MiB, at most 8 MiB): bounds the time of one native call. */
  chunkBytes?: number | string;
  /** `auto` (default) probes each chunk and skips incompressible ones; `lz4` always tries. */
  compression?: 'auto' | 'lz4';
}

/** A decompressed chunk is copied into the value's buffer this many bytes per loop turn. */
const COPY_SLICE_BYTES = 256 * 1024;

/** Compressing a batch gives the event loop a turn after this many milliseconds. */
const SLICE_MS = 2;

/** A copy in a buffer of its own. */
function copyOf(bytes: Buffer): Buffer {
  const copy = Buffer.allocUnsafeSlow(bytes.byteLength);
  copy.set(bytes);
  return copy;
}

interface Held {
  size: number;
  stored: number;
  table: StoredChunk[];
  /** One buffer per chunk: compressed bytes, or a raw copy when compression did not pay. */
  parts: Buffer[];
}

/**
 * Encoded values compressed with lz4 in host memory. Values are cut into chunks that are
 * compressed on the thread pool one at a time, so a 64 MiB value never stalls the loop.
 * The store enforces `capacity` by moving entries down; this tier only reports usage.
 */
export class CompressedMemoryTier implements Tier {
  readonly name: string;
  readonly capacity: number;
  private readonly chunkBytes: number;
  private readonly mode: 'auto' | 'lz4';
  private readonly values = new Map<number, Held>();
  private readonly writes = new WriteTracker();
  private readonly counters = new TierCounters();
  private stored = 0;
  private logical = 0;
  private closed = false;

  constructor(options: CompressedMemoryTierOptions) {
    const capacity = byteOption(options?.capacity, 'capacity');
    checkPositive('capacity', capacity, true);
    this.capacity = capacity;
    this.name = options.name ?? 'compressed-memory';
    this.chunkBytes = byteOption(options.chunkBytes, 'chunkBytes') ?? DEFAULT_CHUNK_BYTES;
    checkPositive('chunkBytes', this.chunkBytes);
    if (!Number.isInteger(this.chunkBytes) || this.chunkBytes > MAX_CHUNK_BYTES) {
      throw new InvalidArgumentError(`chunkBytes must be an integer of at most ${MAX_CHUNK_BYTES}, got ${this.chunkBytes}`);
    }
    this.mode = options.compression ?? 'auto';
    if (this.mode !== 'auto' && this.mode !== 'lz4') {
      throw new InvalidArgumentError(`compression must be 'auto' or 'lz4', got ${String(this.mode)}`);
    }
  }

  async open(): Promise<void> {
    if (this.closed) throw new ClosedError(`tier "${this.name}"`);
    // Fails here, with NativeModuleError, rather than at the first spill.
    lz4();
  }

  async write(id: number, source: WriteSource, byteLength: number): Promise<void> {
    if (this.closed) throw new ClosedError(`tier "${this.name}"`);
    checkId(id, byteLength);
    if (this.values.has(id)) throw new TierDuplicateIdError(this.name, id, 'already holds or is writing');
    const elapsed = TierCounters.timer();
    const job = this.writes.begin(this.name, id);
    try {
      const held: Held = { size: byteLength, stored: 0, table: [], parts: [] };
      for await (const chunk of compressAhead(rechunk(source, byteLength, this.chunkBytes), this.mode)) {
        if (job.cancelled || this.closed) break;
        pushChunk(held.table, chunk.raw.byteLength, chunk.bytes.byteLength, chunk.compressed);
        // A chunk kept raw that is the source's memory: ours only as a copy.
        held.parts.push(chunk.lent ? copyOf(chunk.bytes) : chunk.bytes);
        held.stored += chunk.bytes.byteLength;
      }
      if (this.closed) throw new ClosedError(`tier "${this.name}"`);
      if (job.cancelled) throw new TierWriteCancelledError(this.name, id);
      this.keep(id, held, elapsed());
    } catch (err) {
      this.counters.recordFailedWrite(elapsed());
      throw err;
    } finally {
      this.writes.end(id);
    }
  }

  /**
   * Many small values: each is copied and compressed chunk by chunk like a `write`, with
   * no generator per value, and fails alone. Every item is registered before the first
   * await, so a delete right after the call cancels it.
   */
  async writeMany(items: readonly WriteItem[]): Promise<WriteResults> {
    if (this.closed) throw new ClosedError(`tier "${this.name}"`);
    const results: WriteResults = new Array(items.length);
    const started: { index: number; job: { readonly cancelled: boolean } }[] = [];
    for (const [index, { id, bytes, byteLength }] of items.entries()) {
      try {
        checkId(id, byteLength);
        if (this.values.has(id)) throw new TierDuplicateIdError(this.name, id, 'already holds or is writing');
        let total = 0;
        for (const piece of bytes) total += piece.byteLength;
        if (total !== byteLength) throw lengthError(total, byteLength);
        started.push({ index, job: this.writes.begin(this.name, id) });
      } catch (err) {
        this.counters.recordFailedWrite(0);
        results[index] = { status: 'rejected', reason: err };
      }
    }
    const slicer = new Slicer(SLICE_MS);
    for (const { index, job } of started) {
      const { id, bytes, byteLength } = items[index];
      const elapsed = TierCounters.timer();
      try {
        const held: Held = { size: byteLength, stored: 0, table: [], parts: [] };
        // Chunk by chunk, with a loop turn when a slice is used up: a copy of a large item
        // at once (first touch of fresh memory) held the loop for tens of milliseconds.
        let piece = 0;
        let inPiece = 0;
        for (let offset = 0; offset < byteLength; offset += this.chunkBytes) {
          if (slicer.due()) await slicer.turn();
          // A copy of our own: the pieces are only lent until this call settles.
          const raw = Buffer.allocUnsafeSlow(Math.min(this.chunkBytes, byteLength - offset));
          for (let at = 0; at < raw.byteLength; ) {
            const from = bytes[piece];
            const take = Math.min(from.byteLength - inPiece, raw.byteLength - at);
            raw.set(from.subarray(inPiece, inPiece + take), at);
            at += take;
            inPiece += take;
            if (inPiece === from.byteLength) {
              piece++;
              inPiece = 0;
            }
          }
          const chunk = await compressChunk(raw, this.mode);
          pushChunk(held.table, raw.byteLength, chunk.bytes.byteLength, chunk.compressed);
          held.parts.push(chunk.bytes);
          held.stored += chunk.bytes.byteLength;
        }
        if (this.closed) throw new ClosedError(`tier "${this.name}"`);
        if (job.cancelled) throw new TierWriteCancelledError(this.name, id);
        this.keep(id, held, elapsed());
        results[index] = { status: 'fulfilled', value: undefined };
      } catch (err) {
        this.counters.recordFailedWrite(elapsed());
        results[index] = { status: 'rejected', reason: err };
      } finally {
        this.writes.end(id);
      }
    }
    return results;
  }

  async read(id: number, onChunk?: (chunk: Uint8Array) => void): Promise<Uint8Array> {
    const held = this.get(id);
    const elapsed = TierCounters.timer();
    // allocUnsafeSlow: a buffer of its own, so offset 0 is aligned for any typed array.
    const out = Buffer.allocUnsafeSlow(held.size);
    let next = held.parts.length > 0 ? this.rawChunk(held, 0) : undefined;
    for (let i = 0; next !== undefined; i++) {
      const raw = await next;
      // Start decompressing the next chunk before copying this one.
      next = i + 1 < held.parts.length ? this.rawChunk(held, i + 1) : undefined;
      next?.catch(() => undefined);
      const at = held.table[i].rawOffset;
      // In slices, with a loop turn after each: the first write to fresh memory costs a page
      // fault per 4 KiB, so one large copy would hold the loop for milliseconds.
      for (let done = 0; done < raw.byteLength; done += COPY_SLICE_BYTES) {
        if (done > 0) await yieldToLoop();
        out.set(raw.subarray(done, done + COPY_SLICE_BYTES), at + done);
      }
      onChunk?.(out.subarray(at, at + raw.byteLength));
      // An await on a settled promise is no loop turn: give it one between chunks.
      if (next !== undefined) await yieldToLoop();
    }
    this.counters.recordRead(elapsed(), held.size);
    return out;
  }

  createReadStream(id: number, range?: ByteRange): Readable {
    const produce = async function* (this: CompressedMemoryTier): AsyncGenerator<Uint8Array> {
      const held = this.get(id);
      const { start, end } = clampRange(held.size, range);
      const elapsed = TierCounters.timer();
      if (end > start) {
        for (let i = chunkAt(held.table, start); i < held.table.length; i++) {
          const c = held.table[i];
          if (c.rawOffset >= end) break;
          const raw = await this.rawChunk(held, i);
          yield raw.subarray(Math.max(0, start - c.rawOffset), Math.min(c.rawLength, end - c.rawOffset));
        }
      }
      this.counters.recordRead(elapsed(), end - start);
    };
    return streamOf(() => produce.call(this));
  }

  async delete(id: number): Promise<void> {
    await this.writes.cancel(id);
    const held = this.values.get(id);
    if (held === undefined) return;
    this.values.delete(id);
    this.stored -= held.stored;
    this.logical -= held.size;
    this.counters.deletes++;
  }

  usage(): TierUsage {
    return { count: this.values.size, bytes: this.stored };
  }

  /**
   * By the ratio of everything written so far. Before the first write nothing says how
   * well values compress: one the size of the whole tier is let in, and the store moves it
   * down again if it stored too large.
   */
  estimateStoredBytes(byteLength: number): number {
    const { bytesBeforeCompression: before, bytesAfterCompression: after } = this.counters;
    if (before === 0) return Math.min(byteLength, this.capacity);
    return Math.ceil((byteLength * after) / before);
  }

  stats(): TierStats {
    return this.counters.snapshot(
      { count: this.values.size, bytes: this.stored, logicalBytes: this.logical },
      { compressedChunks: this.counters.compressedChunks, rawChunks: this.counters.rawChunks, capacity: this.capacity },
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.writes.cancelAll();
    this.values.clear();
    this.stored = 0;
    this.logical = 0;
  }

  private keep(id: number, held: Held, seconds: number): void {
    this.counters.recordChunks(held.table);
    this.values.set(id, held);
    this.stored += held.stored;
    this.logical += held.size;
    this.counters.recordWrite(seconds, held.size, held.stored);
  }

  private get(id: number): Held {
    const held = this.values.get(id);
    if (held === undefined) throw new TierMissingError(this.name, id);
    return held;
  }

  private async rawChunk(held: Held, i: number): Promise<Buffer> {
    const c = held.table[i];
    return c.compressed ? decompressChunk(held.parts[i], c.rawLength) : held.parts[i];
  }
}
