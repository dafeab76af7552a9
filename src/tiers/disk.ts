import { createReadStream } from 'node:fs';
import fsp, { type FileHandle } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { ClosedError, SpillwayError } from '../errors.js';
import type { ByteRange, Tier, TierUsage, WriteSource } from './tier.js';

export interface DiskTierOptions {
  /** Parent directory; the tier creates a fresh folder of its own inside it. Default: os.tmpdir(). */
  directory?: string;
  name?: string;
  /** Byte budget for this tier. Default: unlimited. */
  capacity?: number;
  /** Bytes per read call when loading a value. */
  readSliceBytes?: number;
  /** Chunk size of streams that serve peers (about 1 MiB is the sweet spot on loopback). */
  streamChunkBytes?: number;
}

const MiB = 1024 * 1024;

/**
 * One file per value, named by the store's numeric id (never by the key), inside a folder
 * that only this tier uses, so stores can share a parent directory safely.
 */
export class DiskTier implements Tier {
  readonly name: string;
  readonly capacity: number;
  private readonly parent: string;
  private readonly readSliceBytes: number;
  private readonly streamChunkBytes: number;
  private dir: string | undefined;
  private readonly sizes = new Map<number, number>();
  private bytes = 0;
  private closed = false;

  constructor(options: DiskTierOptions = {}) {
    this.name = options.name ?? 'disk';
    this.capacity = options.capacity ?? Infinity;
    this.parent = options.directory ?? os.tmpdir();
    this.readSliceBytes = options.readSliceBytes ?? 8 * MiB;
    this.streamChunkBytes = options.streamChunkBytes ?? MiB;
  }

  /** The folder this tier owns (after open). */
  get directory(): string {
    if (this.dir === undefined) throw new SpillwayError('SPW_ERR_TIER_NOT_OPEN', `tier "${this.name}" is not open`);
    return this.dir;
  }

  async open(): Promise<void> {
    await fsp.mkdir(this.parent, { recursive: true });
    this.dir = await fsp.mkdtemp(path.join(this.parent, 'spillway-'));
  }

  /** Where a value lives; exposed for tests and for serving byte ranges. */
  pathOf(id: number): string {
    return path.join(this.directory, `${id}.spw`);
  }

  async write(id: number, source: WriteSource, byteLength: number): Promise<void> {
    if (this.closed) throw new ClosedError(`tier "${this.name}"`);
    const file = this.pathOf(id);
    // 'wx': an id is never reused, so an existing file means a bug; never overwrite one.
    const handle = await fsp.open(file, 'wx');
    try {
      let position = 0;
      let inflight: Promise<void> | undefined;
      for await (const batch of source) {
        // The producer hashed this batch while the previous one was being written.
        if (inflight !== undefined) await inflight;
        inflight = writeFully(handle, batch, position);
        for (const piece of batch) position += piece.byteLength;
      }
      if (inflight !== undefined) await inflight;
      if (position !== byteLength) {
        throw new SpillwayError('SPW_ERR_TIER_LENGTH', `wrote ${position} bytes, expected ${byteLength}`);
      }
      await handle.close();
    } catch (err) {
      await handle.close().catch(() => undefined);
      await fsp.unlink(file).catch(() => undefined);
      throw err;
    }
    if (this.closed) {
      await fsp.unlink(file).catch(() => undefined);
      throw new ClosedError(`tier "${this.name}"`);
    }
    this.sizes.set(id, byteLength);
    this.bytes += byteLength;
  }

  async read(id: number, onChunk?: (chunk: Uint8Array) => void): Promise<Uint8Array> {
    const size = this.sizes.get(id);
    if (size === undefined) throw new SpillwayError('SPW_ERR_TIER_MISSING', `tier "${this.name}" holds no value ${id}`);
    const handle = await fsp.open(this.pathOf(id), 'r');
    try {
      // allocUnsafeSlow: a buffer of its own, so offset 0 is aligned for any typed array.
      const out = Buffer.allocUnsafeSlow(size);
      let offset = 0;
      let pending = size > 0 ? handle.read(out, 0, Math.min(this.readSliceBytes, size), 0) : undefined;
      while (pending !== undefined) {
        const { bytesRead } = await pending;
        if (bytesRead === 0) {
          throw new SpillwayError('SPW_ERR_TIER_TRUNCATED', `file for value ${id} ends at ${offset} of ${size} bytes`);
        }
        const landed = out.subarray(offset, offset + bytesRead);
        offset += bytesRead;
        // Start the next read before hashing this piece, so the two overlap.
        pending = offset < size ? handle.read(out, offset, Math.min(this.readSliceBytes, size - offset), offset) : undefined;
        onChunk?.(landed);
      }
      return out;
    } finally {
      await handle.close();
    }
  }

  createReadStream(id: number, range: ByteRange = {}): Readable {
    const size = this.sizes.get(id) ?? 0;
    const start = range.start ?? 0;
    const end = Math.min(range.end ?? size, size);
    return createReadStream(this.pathOf(id), {
      start,
      end: Math.max(start, end) - 1,
      highWaterMark: this.streamChunkBytes,
    });
  }

  async delete(id: number): Promise<void> {
    const size = this.sizes.get(id);
    if (size === undefined) return;
    this.sizes.delete(id);
    this.bytes -= size;
    await fsp.unlink(this.pathOf(id)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  usage(): TierUsage {
    return { count: this.sizes.size, bytes: this.bytes };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.sizes.clear();
    this.bytes = 0;
    if (this.dir !== undefined) await fsp.rm(this.dir, { recursive: true, force: true });
  }
}

/** writev, looping on short writes (pwritev may write less than asked). */
async function writeFully(handle: FileHandle, batch: readonly Uint8Array[], position: number): Promise<void> {
  let pieces = batch.slice();
  while (pieces.length > 0) {
    const wanted = pieces.reduce((sum, p) => sum + p.byteLength, 0);
    const { bytesWritten } =
      pieces.length === 1 ? await handle.write(pieces[0], 0, wanted, position) : await handle.writev(pieces, position);
    if (bytesWritten === wanted) return;
    if (bytesWritten <= 0) throw new SpillwayError('SPW_ERR_TIER_SHORT_WRITE', 'write made no progress');
    position += bytesWritten;
    let skip = bytesWritten;
    const rest: Uint8Array[] = [];
    for (const p of pieces) {
      if (skip >= p.byteLength) {
        skip -= p.byteLength;
        continue;
      }
      rest.push(skip > 0 ? p.subarray(skip) : p);
      skip = 0;
    }
    pieces = rest;
  }
}
