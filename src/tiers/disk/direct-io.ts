import fsp, { type FileHandle } from 'node:fs/promises';
import { constants } from 'node:fs';
import { TierShortWriteError } from '../../errors.js';
import { MiB } from '../chunks.js';
import { writeFully } from './file-io.js';
import type { Segment } from './segment.js';

// The project's lib settings leave out WebAssembly's types; only Memory is used.
declare const WebAssembly: { Memory: new (descriptor: { initial: number; maximum: number }) => { readonly buffer: ArrayBuffer } };

/**
 * Segment writes that bypass the page cache (O_DIRECT), see docs/tiers.md "Direct writes".
 *
 * Why: a spilled value is cold by definition (it left memory as least recently used), and
 * a buffered write makes the kernel copy it into page-cache pages it must find first,
 * spending kernel CPU on a core the store's own thread needs. It also keeps a second copy
 * of spilled data in memory, the very thing spilling is for.
 *
 * O_DIRECT wants the buffer's address, the file offset and the length aligned to the
 * device's block. Groups are copied into page-aligned staging buffers, their start is
 * aligned by writing an unaligned head through the buffered handle, and their end is padded
 * with zeros to the next block (the padding is reserved: no later group shares that block).
 */

/** 4 KiB: covers 512-byte and 4 KiB devices, and is the page size. */
export const DIRECT_ALIGN = 4096;
/** A group's aligned body smaller than this is written buffered: its padding would be a large share. */
export const DIRECT_MIN_BYTES = 128 * 1024;
const STAGING_BYTES = MiB;
/** Staging buffers for the whole process: writes beyond them wait for one to come back. */
const STAGING_BUFFERS = 8;
const WASM_PAGE = 64 * 1024;

export const alignUp = (n: number): number => Math.ceil(n / DIRECT_ALIGN) * DIRECT_ALIGN;

/**
 * Page-aligned staging buffers, shared by every tier of the process. A WebAssembly.Memory
 * is allocated page-aligned (an ArrayBuffer from malloc is not), and one is made per
 * process because each reserves a large range of address space.
 */
export class StagingPool {
  #memory: { readonly buffer: ArrayBuffer } | undefined;
  #failed = false;
  readonly #spare: Uint8Array[] = [];
  readonly #waiting: ((buffer: Uint8Array) => void)[] = [];

  /**
   * Makes the buffers on first use; false if that fails (a WebAssembly.Memory reserves
   * gigabytes of address space for its guard regions: a `ulimit -v` may refuse it).
   */
  ready(): boolean {
    if (this.#memory !== undefined || this.#failed) return !this.#failed;
    const pages = (STAGING_BUFFERS * STAGING_BYTES) / WASM_PAGE;
    try {
      this.#memory = new WebAssembly.Memory({ initial: pages, maximum: pages });
    } catch {
      this.#failed = true;
      return false;
    }
    for (let i = 0; i < STAGING_BUFFERS; i++) this.#spare.push(new Uint8Array(this.#memory.buffer, i * STAGING_BYTES, STAGING_BYTES));
    return true;
  }

  /** A buffer, once one is free (only after `ready()` said true). */
  take(): Promise<Uint8Array> {
    const buffer = this.#spare.pop();
    if (buffer !== undefined) return Promise.resolve(buffer);
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  give(buffer: Uint8Array): void {
    const next = this.#waiting.shift();
    if (next !== undefined) next(buffer);
    else this.#spare.push(buffer);
  }
}

const sharedStaging = new StagingPool();

/**
 * A direct write the filesystem refused (EINVAL: no O_DIRECT there, or an alignment it does
 * not take). Internal: `writeGroup` catches it and the group is written buffered, so it
 * never reaches a tier's caller (which is why it is not one of the coded errors).
 */
export class DirectRefused extends Error {}

/** Whether a tier's segment writes go direct, and the writes themselves. */
export class DirectWrites {
  #on: boolean;
  /** Why direct writes were turned off after being asked for (diagnostics). */
  offBecause: string | undefined;

  constructor(
    wanted: boolean,
    private readonly staging = sharedStaging,
  ) {
    // O_DIRECT is undefined where the platform has none (macOS).
    this.#on = wanted && typeof constants.O_DIRECT === 'number';
    if (wanted && !this.#on) this.offBecause = 'O_DIRECT is not available on this platform';
  }

  get on(): boolean {
    return this.#on;
  }

  /** Buffered writes from now on, for every segment of the tier. */
  turnOff(reason: string): void {
    this.#on = false;
    this.offBecause ??= reason;
  }

  /** Whether the staging buffers exist (made now if need be); if they cannot be made, direct writes are off. */
  #staged(): boolean {
    if (this.staging.ready()) return true;
    this.turnOff('no page-aligned staging memory could be made');
    return false;
  }

  /** A write-only direct handle on an existing file, or undefined (and direct writes off) if the filesystem refuses one. */
  async open(file: string): Promise<FileHandle | undefined> {
    if (!this.#on || !this.#staged()) return undefined;
    try {
      return await fsp.open(file, constants.O_WRONLY | constants.O_DIRECT);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
      this.turnOff(`the filesystem of ${file} refuses O_DIRECT`);
      return undefined;
    }
  }

  /**
   * Writes a segment group [start, end): its unaligned head through the buffered handle,
   * the rest direct. Returns false when the group is better written buffered: direct writes
   * turned out refused (part of the group may be written: the caller writes the whole group
   * again, the same bytes), or the direct handle could not be opened this time (EMFILE...:
   * the next group tries again).
   */
  async writeGroup(seg: Segment, buffered: FileHandle, pieces: readonly Uint8Array[], start: number, end: number): Promise<boolean> {
    let handle: FileHandle | undefined;
    try {
      handle = await (seg.direct ??= this.open(seg.path));
    } catch {
      seg.direct = undefined;
      return false;
    }
    if (handle === undefined) return false;
    const body = alignUp(start);
    const [head, rest] = splitPieces(pieces, body - start);
    const settled = await Promise.allSettled([
      body > start ? writeFully(buffered, head, start) : Promise.resolve(),
      this.write(handle, rest, body, end - body),
    ]);
    if (settled[1].status === 'rejected' && settled[1].reason instanceof DirectRefused) return false;
    for (const s of settled) if (s.status === 'rejected') throw s.reason;
    return true;
  }

  /**
   * Writes `byteLength` bytes of `pieces` at `position` (aligned), padded with zeros to the
   * next block, in staging-buffer pieces written concurrently. Throws DirectRefused (and
   * turns direct writes off) on EINVAL; the caller then writes the group buffered.
   */
  async write(handle: FileHandle, pieces: readonly Uint8Array[], position: number, byteLength: number): Promise<void> {
    if (!this.#staged()) throw new DirectRefused('no staging memory');
    const cursor = new PieceCursor(pieces);
    const writes: Promise<void>[] = [];
    let failed = false;
    for (let done = 0; done < byteLength && !failed; ) {
      const buffer = await this.staging.take();
      const bytes = Math.min(STAGING_BYTES, byteLength - done);
      cursor.copyTo(buffer, bytes);
      const padded = alignUp(bytes);
      buffer.fill(0, bytes, padded);
      const at = position + done;
      done += bytes;
      const written = writeAligned(handle, buffer.subarray(0, padded), at).then(
        () => this.staging.give(buffer),
        (err: unknown) => {
          failed = true;
          this.staging.give(buffer);
          throw err;
        },
      );
      // Handled now: a write that fails (ENOSPC) while the loop waits for a staging buffer
      // would otherwise be an unhandled rejection, which ends the process. allSettled reports it.
      written.catch(() => undefined);
      writes.push(written);
    }
    const settled = await Promise.allSettled(writes);
    const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failure === undefined) return;
    if ((failure.reason as NodeJS.ErrnoException).code === 'EINVAL') {
      this.turnOff('a direct write was refused (EINVAL)');
      throw new DirectRefused('direct write refused');
    }
    throw failure.reason;
  }
}

/** pwrite of a whole aligned buffer; a short write continues only while it stays aligned. */
async function writeAligned(handle: FileHandle, buffer: Uint8Array, position: number): Promise<void> {
  for (let done = 0; done < buffer.byteLength; ) {
    const { bytesWritten } = await handle.write(buffer, done, buffer.byteLength - done, position + done);
    if (bytesWritten <= 0 || bytesWritten % DIRECT_ALIGN !== 0) throw new TierShortWriteError();
    done += bytesWritten;
  }
}

/** Reads a list of pieces front to back into other buffers. */
class PieceCursor {
  #index = 0;
  #offset = 0;
  constructor(private readonly pieces: readonly Uint8Array[]) {}

  /** Copies the next `bytes` bytes into the start of `out`. */
  copyTo(out: Uint8Array, bytes: number): void {
    let at = 0;
    while (at < bytes) {
      const piece = this.pieces[this.#index];
      const take = Math.min(piece.byteLength - this.#offset, bytes - at);
      out.set(take === piece.byteLength ? piece : piece.subarray(this.#offset, this.#offset + take), at);
      at += take;
      this.#offset += take;
      if (this.#offset === piece.byteLength) {
        this.#index++;
        this.#offset = 0;
      }
    }
  }
}

/** Splits pieces after their first `bytes` bytes (a piece across the cut becomes two views). */
export function splitPieces(pieces: readonly Uint8Array[], bytes: number): [Uint8Array[], Uint8Array[]] {
  const head: Uint8Array[] = [];
  const tail: Uint8Array[] = [];
  let left = bytes;
  for (const piece of pieces) {
    if (left >= piece.byteLength) {
      head.push(piece);
      left -= piece.byteLength;
    } else if (left > 0) {
      head.push(piece.subarray(0, left));
      tail.push(piece.subarray(left));
      left = 0;
    } else {
      tail.push(piece);
    }
  }
  return [head, tail];
}
