/**
 * Reusable ArrayBuffers of a few sizes (four per power of two: 4, 5, 6, 7, 8 MiB...), for memory that is filled, used
 * and given up again and again on the main thread (a shuffle's chunks). V8 runs a major
 * collection for every few dozen MiB of ArrayBuffers allocated once they live long enough
 * to be promoted; a buffer taken again from here costs none.
 *
 * Only buffers the owner holds alone may be given back: a buffer given back while
 * anything can still read it would be filled with other bytes under that reader. The
 * pool keeps at most `maxSpareBytes` waiting; the rest is freed at once (buffer-release.ts),
 * as `clear` frees the spares: the giver holds it alone, so nothing can read it after.
 */
import { InvalidArgumentError } from '../errors.js';
import { releaseBuffers } from './buffer-release.js';

export interface SizedBufferPoolOptions {
  /** Smallest buffer handed out (a power of two). */
  minBytes: number;
  /** Largest pooled request; a larger one gets a buffer of its own, never pooled. */
  maxBytes: number;
  /** Bytes of spare buffers kept for reuse. */
  maxSpareBytes: number;
}

export class SizedBufferPool {
  readonly #options: SizedBufferPoolOptions;
  /** Spare buffers per size. */
  readonly #spare = new Map<number, ArrayBuffer[]>();
  /** Buffers waiting here: a second give of the same one is ignored. */
  readonly #waiting = new WeakSet<ArrayBuffer>();
  /** Buffers this pool handed out (allocated, or given back and handed out again). */
  readonly #made = new WeakSet<ArrayBuffer>();
  #spareBytes = 0;
  /** Buffers handed out that were spare (not allocated). */
  reused = 0;
  /** Buffers allocated. */
  allocated = 0;

  constructor(options: SizedBufferPoolOptions) {
    const { minBytes, maxBytes, maxSpareBytes } = options;
    if (!isPowerOfTwo(minBytes) || minBytes < 8 || !Number.isSafeInteger(maxBytes) || minBytes > maxBytes) {
      throw new InvalidArgumentError(`a buffer pool needs minBytes a power of two of at least 8 and maxBytes >= minBytes, got ${minBytes} and ${maxBytes}`);
    }
    if (!Number.isSafeInteger(maxSpareBytes) || maxSpareBytes < 0) throw new InvalidArgumentError(`maxSpareBytes must be a non-negative whole number, got ${maxSpareBytes}`);
    this.#options = options;
  }

  /** Bytes of spare buffers waiting to be reused. */
  get spareBytes(): number {
    return this.#spareBytes;
  }

  /** This pool handed `buffer` out (its holder knows whether it holds it alone). */
  made(buffer: ArrayBufferLike): boolean {
    return buffer instanceof ArrayBuffer && this.#made.has(buffer);
  }

  /** A view of `bytes` at offset 0 of a buffer of its own (reused when one is spare), 8-byte aligned. */
  take(bytes: number): Uint8Array {
    const size = this.#classOf(bytes);
    if (size === undefined) {
      this.allocated++;
      const own = new ArrayBuffer(bytes);
      this.#made.add(own);
      return new Uint8Array(own);
    }
    // A spare one of the next size up will do too: chunks of one size vary a little.
    const spare = this.#spare.get(size)?.pop() ?? this.#spare.get(sizeAbove(size))?.pop();
    if (spare !== undefined) {
      this.#waiting.delete(spare);
      this.#spareBytes -= spare.byteLength;
      this.reused++;
      this.#made.add(spare);
      return new Uint8Array(spare, 0, bytes);
    }
    this.allocated++;
    const buffer = new ArrayBuffer(size);
    this.#made.add(buffer);
    return new Uint8Array(buffer, 0, bytes);
  }

  /**
   * Gives a buffer back for reuse: only one the caller holds alone, which nothing reads or
   * writes any more. Buffers not of a pooled size, or past the spare limit, are freed now
   * rather than left to the collector. True when kept.
   */
  give(buffer: ArrayBufferLike): boolean {
    if (!(buffer instanceof ArrayBuffer) || this.#waiting.has(buffer)) return false;
    const size = buffer.byteLength;
    if (size === 0) return false;
    if (size > this.#options.maxBytes || this.#classOf(size) !== size || this.#spareBytes + size > this.#options.maxSpareBytes) {
      releaseBuffers([buffer]);
      return false;
    }
    let list = this.#spare.get(size);
    if (list === undefined) {
      list = [];
      this.#spare.set(size, list);
    }
    list.push(buffer);
    this.#waiting.add(buffer);
    this.#spareBytes += size;
    return true;
  }

  /** Frees every spare buffer (buffer-release.ts): the memory is not needed for a while. */
  clear(): void {
    for (const list of this.#spare.values()) releaseBuffers(list);
    this.#spare.clear();
    this.#spareBytes = 0;
  }

  /** The pooled size for `bytes`, or undefined when too large to pool. */
  #classOf(bytes: number): number | undefined {
    if (!Number.isSafeInteger(bytes) || bytes < 0) throw new InvalidArgumentError(`a buffer size is a non-negative whole number, got ${bytes}`);
    if (bytes > this.#options.maxBytes) return undefined;
    return sizeClass(bytes, this.#options.minBytes);
  }
}

/**
 * The size a pool hands out for `bytes`: `minBytes` at least, else one of four sizes per
 * power of two, at most a quarter more than asked for.
 */
export function sizeClass(bytes: number, minBytes: number): number {
  if (bytes <= minBytes) return minBytes;
  const step = 2 ** (Math.floor(Math.log2(bytes)) - 2);
  return Math.ceil(bytes / step) * step;
}

/** The size class after `size` (see sizeClass). */
export function sizeAbove(size: number): number {
  return size + 2 ** (Math.floor(Math.log2(size)) - 2);
}

function isPowerOfTwo(n: number): boolean {
  return Number.isSafeInteger(n) && n > 0 && Number.isInteger(Math.log2(n));
}
