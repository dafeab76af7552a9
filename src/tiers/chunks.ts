import { Readable } from 'node:stream';
import { InvalidArgumentError, SpillwayError, TierCorruptError, TierLengthError, errorMessage } from '../errors.js';
import { yieldToLoop } from '../loop.js';
import { lz4 } from '../native.js';
import type { ByteRange, WriteSource } from './tier.js';

/** `lz4`: compress every chunk; `auto`: only chunks a quick probe says will shrink; `none`: never. */
export type CompressionMode = 'lz4' | 'none' | 'auto';

export const KiB = 1024;
export const MiB = 1024 * KiB;
/** Compression unit: small enough that one native call is short, big enough for a good ratio. */
export const DEFAULT_CHUNK_BYTES = MiB;
/** Largest chunk we accept: the most one native call should take, at lz4's speed. */
export const MAX_CHUNK_BYTES = 8 * MiB;
/** Below this, lz4 runs synchronously: a thread-pool round trip costs more than the work. */
const SYNC_BYTES = 64 * KiB;
const PROBE_BYTES = 16 * KiB;
/** `auto` keeps a chunk compressed only if it saves at least this fraction. */
const AUTO_MIN_SAVINGS = 1 / 8;

/** Where one chunk of a value lives in the stored bytes. */
export interface StoredChunk {
  rawOffset: number;
  rawLength: number;
  storedOffset: number;
  storedLength: number;
  compressed: boolean;
}

export { yieldToLoop };

export function lengthError(got: number, expected: number): SpillwayError {
  return new TierLengthError(got, expected);
}

/** A chunk of a value being written. */
export interface RawChunk {
  bytes: Buffer;
  /**
   * A view of the source's own memory, lent until the write settles (see WriteSource):
   * a tier that keeps the chunk as it is must copy it.
   */
  lent: boolean;
}

/**
 * Re-cuts a write source into chunks of `chunkBytes` (the last may be shorter), checking
 * that it yields exactly `byteLength` bytes. A chunk that lies inside one of the source's
 * pieces is a view of it; only chunks that straddle pieces are copied. Copying every
 * chunk would cost a value's size in fresh memory per write, first touched on the loop
 * (page faults) and then garbage for the collector.
 */
export async function* rechunk(source: WriteSource, byteLength: number, chunkBytes: number): AsyncGenerator<RawChunk> {
  let chunk: Buffer | undefined;
  let filled = 0;
  let total = 0;
  for await (const batch of source) {
    for (const piece of batch) {
      if (total + piece.byteLength > byteLength) throw lengthError(total + piece.byteLength, byteLength);
      let offset = 0;
      while (offset < piece.byteLength) {
        const length = Math.min(chunkBytes, byteLength - (total - filled));
        if (filled === 0 && piece.byteLength - offset >= length) {
          const view = Buffer.from(piece.buffer, piece.byteOffset + offset, length);
          offset += length;
          total += length;
          yield { bytes: view, lent: true };
        } else {
          chunk ??= Buffer.allocUnsafeSlow(length);
          const take = Math.min(piece.byteLength - offset, length - filled);
          chunk.set(piece.subarray(offset, offset + take), filled);
          filled += take;
          offset += take;
          total += take;
          if (filled < length) continue;
          yield { bytes: chunk, lent: false };
          chunk = undefined;
          filled = 0;
        }
        // The consumer's work on a chunk (a copy, a probe) is synchronous: let the loop breathe.
        if (total < byteLength) await yieldToLoop();
      }
    }
  }
  if (total !== byteLength) throw lengthError(total, byteLength);
}

/** A one-batch write source without a generator (cheap, for the many small values). */
export function oneBatch(batch: readonly Uint8Array[]): WriteSource {
  return {
    [Symbol.asyncIterator]() {
      let done = false;
      return {
        next: () => {
          if (done) return Promise.resolve({ done: true as const, value: undefined });
          done = true;
          return Promise.resolve({ done: false as const, value: batch });
        },
      };
    },
  };
}

/**
 * Collects a small value's pieces as the source gives them, checking their total. No copy:
 * the pieces go to the segment's writev as they are (a source leaves them untouched until
 * the write settles; see WriteSource).
 */
export async function collectPieces(source: WriteSource, byteLength: number): Promise<Uint8Array[]> {
  const pieces: Uint8Array[] = [];
  let total = 0;
  for await (const batch of source) {
    for (const piece of batch) {
      total += piece.byteLength;
      if (total > byteLength) throw lengthError(total, byteLength);
      if (piece.byteLength > 0) pieces.push(piece);
    }
  }
  if (total !== byteLength) throw lengthError(total, byteLength);
  return pieces;
}

function compressLz4(raw: Buffer): Promise<Buffer> | Buffer {
  const binding = lz4();
  return raw.byteLength <= SYNC_BYTES ? binding.compressSync(raw) : binding.compress(raw);
}

/** Compresses one chunk if it pays; returns the bytes to store and whether they are compressed. */
export async function compressChunk(raw: Buffer, mode: CompressionMode): Promise<{ bytes: Buffer; compressed: boolean }> {
  if (mode === 'none' || raw.byteLength === 0) return { bytes: raw, compressed: false };
  if (mode === 'auto' && raw.byteLength > 4 * PROBE_BYTES) {
    // A small probe from the middle is cheap and spares compressing incompressible data.
    const mid = Math.floor((raw.byteLength - PROBE_BYTES) / 2);
    const probe = lz4().compressSync(raw.subarray(mid, mid + PROBE_BYTES));
    if (probe.byteLength > PROBE_BYTES * (1 - AUTO_MIN_SAVINGS)) return { bytes: raw, compressed: false };
  }
  const packed = await compressLz4(raw);
  const limit = mode === 'auto' ? raw.byteLength * (1 - AUTO_MIN_SAVINGS) : raw.byteLength - 1;
  return packed.byteLength <= limit ? { bytes: packed, compressed: true } : { bytes: raw, compressed: false };
}

/** Decompresses a stored chunk, checking it yields the expected length. */
export async function decompressChunk(stored: Uint8Array, rawLength: number): Promise<Buffer> {
  const binding = lz4();
  let raw: Buffer;
  try {
    raw = rawLength <= SYNC_BYTES ? binding.uncompressSync(stored) : await binding.uncompress(stored);
  } catch (err) {
    // lz4 refuses bytes that are not a block it wrote: the stored copy is corrupt.
    throw new TierCorruptError(`compressed chunk does not decompress: ${errorMessage(err)}`);
  }
  if (raw.byteLength !== rawLength) {
    throw new TierCorruptError(`compressed chunk gave ${raw.byteLength} bytes, expected ${rawLength}`);
  }
  return raw;
}

/** A small value's bytes as stored (compressed per chunk if enabled). */
export interface Packed {
  pieces: readonly Uint8Array[];
  stored: number;
  /** Every chunk (empty when compression is off). */
  table: StoredChunk[];
}

/** A small value's stored form: its pieces as they are, or compressed chunk by chunk. */
export async function packSmall(pieces: readonly Uint8Array[], byteLength: number, mode: CompressionMode, chunkBytes: number): Promise<Packed> {
  if (mode === 'none' || byteLength === 0) return { pieces, stored: byteLength, table: [] };
  const raw = pieces.length === 1 ? Buffer.from(pieces[0].buffer, pieces[0].byteOffset, pieces[0].byteLength) : Buffer.concat(pieces);
  const out: Buffer[] = [];
  const table: StoredChunk[] = [];
  for (let at = 0; at < byteLength; at += chunkBytes) {
    const chunk = await compressChunk(raw.subarray(at, at + chunkBytes), mode);
    pushChunk(table, Math.min(chunkBytes, byteLength - at), chunk.bytes.byteLength, chunk.compressed);
    out.push(chunk.bytes);
  }
  return { pieces: out, stored: out.reduce((sum, p) => sum + p.byteLength, 0), table };
}

export interface PackedChunk {
  raw: Buffer;
  bytes: Buffer;
  compressed: boolean;
  /** `bytes` is the source's own memory (raw and lent): copy it to keep it. */
  lent: boolean;
}

/** Compresses chunks one ahead of the consumer, so compression overlaps the consumer's I/O. */
export async function* compressAhead(chunks: AsyncIterable<RawChunk>, mode: CompressionMode): AsyncGenerator<PackedChunk> {
  let pending: Promise<PackedChunk> | undefined;
  try {
    for await (const { bytes: raw, lent } of chunks) {
      const next = compressChunk(raw, mode).then((c) => ({ raw, ...c, lent: lent && !c.compressed }));
      // Marked handled: if the consumer stops early, nobody awaits it.
      next.catch(() => undefined);
      if (pending !== undefined) yield await pending;
      pending = next;
    }
    if (pending !== undefined) yield await pending;
  } finally {
    pending = undefined;
  }
}

/** Appends a chunk to a chunk table. */
export function pushChunk(table: StoredChunk[], rawLength: number, storedLength: number, compressed: boolean): void {
  const last = table[table.length - 1];
  table.push({
    rawOffset: last === undefined ? 0 : last.rawOffset + last.rawLength,
    rawLength,
    storedOffset: last === undefined ? 0 : last.storedOffset + last.storedLength,
    storedLength,
    compressed,
  });
}

/** Index of the chunk holding raw byte `position` (binary search). */
export function chunkAt(table: readonly StoredChunk[], position: number): number {
  let lo = 0;
  let hi = table.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (table[mid].rawOffset <= position) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** Validates a range against a value's size; `end` past the value is clamped. */
export function clampRange(size: number, range: ByteRange = {}): { start: number; end: number } {
  const start = range.start ?? 0;
  const end = range.end ?? size;
  for (const [label, n] of [
    ['start', start],
    ['end', end],
  ] as const) {
    if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`range ${label} must be a non-negative integer, got ${n}`);
  }
  const s = Math.min(start, size);
  return { start: s, end: Math.max(s, Math.min(end, size)) };
}

/**
 * A Readable of a value's pieces, one chunk per read, never joined: a byte-mode Readable's
 * async iterator concatenates whatever is buffered (a copy on the event loop), and a joined
 * chunk could not be handed back for reuse (`recycle`).
 */
export function streamOf(produce: () => AsyncGenerator<Uint8Array>): Readable {
  return Readable.from(produce(), { objectMode: true, highWaterMark: 2 });
}
