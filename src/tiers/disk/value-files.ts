import fsp, { type FileHandle } from 'node:fs/promises';
import type { SpillwayError } from '../../errors.js';
import { compressAhead, decompressChunk, lengthError, pushChunk, rechunk, yieldToLoop, type CompressionMode, type StoredChunk } from '../chunks.js';
import { readFully, writeFully } from './file-io.js';
import type { WriteSource } from '../tier.js';

/** Where a value's stored bytes are: an open file and the offset they start at. */
export interface StoredBytes {
  handle: FileHandle;
  base: number;
}

/**
 * Reads a whole value into `out`. Uncompressed values are read in slices straight into
 * `out`, the next slice in flight while `onChunk` hashes the previous one; compressed
 * chunks are read one ahead of their decompression.
 */
export async function readValue(
  stored: StoredBytes,
  table: readonly StoredChunk[] | undefined,
  out: Buffer,
  sliceBytes: number,
  onChunk?: (chunk: Uint8Array) => void,
): Promise<void> {
  const { handle, base } = stored;
  const size = out.byteLength;
  if (table === undefined) {
    let offset = 0;
    let pending = size > 0 ? readFully(handle, out, 0, Math.min(sliceBytes, size), base) : undefined;
    while (pending !== undefined) {
      await pending;
      const n = Math.min(sliceBytes, size - offset);
      const landed = out.subarray(offset, offset + n);
      offset += n;
      pending = offset < size ? readFully(handle, out, offset, Math.min(sliceBytes, size - offset), base + offset) : undefined;
      pending?.catch(() => undefined);
      onChunk?.(landed);
    }
    return;
  }
  const fetch = (c: StoredChunk): Promise<Buffer> => readStoredChunk(stored, c, out);
  let next = table.length > 0 ? fetch(table[0]) : undefined;
  for (let i = 0; next !== undefined; i++) {
    const c = table[i];
    const bytes = await next;
    next = i + 1 < table.length ? fetch(table[i + 1]) : undefined;
    next?.catch(() => undefined);
    if (c.compressed) out.set(await decompressChunk(bytes, c.rawLength), c.rawOffset);
    onChunk?.(out.subarray(c.rawOffset, c.rawOffset + c.rawLength));
    // Settled awaits are no loop turns: give the loop one between chunks of a big value.
    if (next !== undefined) await yieldToLoop();
  }
}

/** A raw chunk lands in place in `out`; a compressed one in a buffer of its own. */
async function readStoredChunk(stored: StoredBytes, c: StoredChunk, out: Buffer): Promise<Buffer> {
  if (!c.compressed) {
    await readFully(stored.handle, out, c.rawOffset, c.rawLength, stored.base + c.storedOffset);
    return out.subarray(c.rawOffset, c.rawOffset + c.rawLength);
  }
  const bytes = Buffer.allocUnsafe(c.storedLength);
  await readFully(stored.handle, bytes, 0, c.storedLength, stored.base + c.storedOffset);
  return bytes;
}

/** Yields the bytes [start, end) of a value, decompressing only the chunks the range touches. */
export async function* streamRange(
  stored: StoredBytes,
  table: readonly StoredChunk[] | undefined,
  start: number,
  end: number,
  pieceBytes: number,
  allocate: (bytes: number) => Buffer = (bytes) => Buffer.allocUnsafe(bytes),
): AsyncGenerator<Buffer> {
  const { handle, base } = stored;
  if (table === undefined) {
    for (let at = start; at < end; at += pieceBytes) {
      const piece = allocate(Math.min(pieceBytes, end - at));
      await readFully(handle, piece, 0, piece.byteLength, base + at);
      yield piece;
    }
    return;
  }
  for (const c of table) {
    if (c.rawOffset + c.rawLength <= start) continue;
    if (c.rawOffset >= end) break;
    const from = Math.max(start, c.rawOffset) - c.rawOffset;
    const to = Math.min(end, c.rawOffset + c.rawLength) - c.rawOffset;
    if (!c.compressed) {
      yield* streamRange({ handle, base: base + c.storedOffset }, undefined, from, to, pieceBytes, allocate);
      continue;
    }
    const packed = Buffer.allocUnsafe(c.storedLength);
    await readFully(handle, packed, 0, c.storedLength, base + c.storedOffset);
    const raw = await decompressChunk(packed, c.rawLength);
    yield raw.subarray(from, to);
  }
}

/**
 * Writes a value to a new file of its own as the source yields, compressed per chunk if
 * enabled (the next chunk compressed while this one is written). `abandoned` is asked
 * between steps; a failure or an abandoned write leaves no file.
 */
export async function writeValueFile(
  file: string,
  source: WriteSource,
  byteLength: number,
  compression: CompressionMode,
  chunkBytes: number,
  abandoned: () => SpillwayError | undefined,
): Promise<{ stored: number; table: StoredChunk[] }> {
  // 'wx': an id is never reused, so an existing file means a bug; never overwrite one.
  const handle = await fsp.open(file, 'wx');
  let position = 0;
  const table: StoredChunk[] = [];
  try {
    if (compression === 'none') {
      let inflight: Promise<void> | undefined;
      let total = 0;
      for await (const batch of source) {
        // The producer hashed this batch while the previous one was being written.
        if (inflight !== undefined) await inflight;
        throwIf(abandoned());
        for (const piece of batch) total += piece.byteLength;
        if (total > byteLength) throw lengthError(total, byteLength);
        inflight = writeFully(handle, batch, position);
        inflight.catch(() => undefined);
        position = total;
      }
      if (inflight !== undefined) await inflight;
      if (total !== byteLength) throw lengthError(total, byteLength);
    } else {
      for await (const chunk of compressAhead(rechunk(source, byteLength, chunkBytes), compression)) {
        throwIf(abandoned());
        await writeFully(handle, [chunk.bytes], position);
        pushChunk(table, chunk.raw.byteLength, chunk.bytes.byteLength, chunk.compressed);
        position += chunk.bytes.byteLength;
      }
    }
    await handle.close();
    throwIf(abandoned());
  } catch (err) {
    await handle.close().catch(() => undefined);
    await fsp.unlink(file).catch(() => undefined);
    throw err;
  }
  return { stored: position, table };
}

function throwIf(err: SpillwayError | undefined): void {
  if (err !== undefined) throw err;
}
