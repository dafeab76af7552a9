/**
 * Push frames for reuse. A split lays its pieces out in frames on a task thread, and the
 * frames move to the worker's loop to be pushed. The frames of at least half a frame's size
 * are laid out in shared memory from this pool, lent to the split and given back once the
 * worker is done with them, for the next split.
 *
 * Shared memory because V8 counts neither thread's SharedArrayBuffer memory toward its next
 * mark-compact. Every ArrayBuffer that arrives on the loop is counted, and one that moves
 * to a thread and back is counted again when it returns (runtime/buffer-release.ts): frames
 * of ordinary buffers, a split's worth arriving at once, would start a full marking of the
 * loop's heap about every split. Reused, the frames are also memory already touched, where a
 * fresh one costs the thread its page faults.
 *
 * Shared memory is freed only once every thread that saw it has collected its handle, so
 * the pool does not let its buffers go: it keeps every one it made, at most `maxSpares`, for
 * the worker's life, but for one a failed push may still be reading (`lose`). A frame it
 * cannot lend is an ordinary buffer the thread allocates. A buffer comes back from the
 * thread as a new SharedArrayBuffer object over the same memory; `adopt` makes it the
 * pool's handle for that memory.
 *
 * Ownership is exact: a frame comes back only once nothing reads it (FrameLoan), and a
 * spare is lent to one split at a time, which says which spares it filled.
 */
import { InvalidArgumentError } from '../errors.js';
import { releaseBuffers } from '../runtime/buffer-release.js';

/**
 * Shared frame buffers a worker keeps for its splits: a 64th of its memory limit, but up to
 * four frames within a 16th of it, so that a small worker still covers one split's frames
 * to a couple of peers, and never more than 32. They are held for the worker's life,
 * outside the store.
 */
export function frameSpareCount(memoryLimit: number, frameBytes: number): number {
  const frames = memoryLimit / frameBytes;
  return Math.min(32, Math.max(Math.floor(frames / 64), Math.min(4, Math.floor(frames / 16))));
}

/** Shared frame buffers of one size, at most `maxSpares` of them made. */
export class FrameSpares {
  readonly #spares: SharedArrayBuffer[] = [];
  /** Spares waiting here: a buffer given twice is kept once. */
  readonly #waiting = new WeakSet<SharedArrayBuffer>();
  /** Handles of the memory this pool made: only those are taken back. */
  readonly #ours = new WeakSet<SharedArrayBuffer>();
  #made = 0;

  constructor(
    readonly frameBytes: number,
    readonly maxSpares: number,
  ) {
    if (!Number.isSafeInteger(frameBytes) || frameBytes <= 0) throw new InvalidArgumentError(`frameBytes must be a positive whole number, got ${frameBytes}`);
    if (!Number.isSafeInteger(maxSpares) || maxSpares < 0) throw new InvalidArgumentError(`maxSpares must be a non-negative whole number, got ${maxSpares}`);
  }

  /** Spares waiting to be lent. */
  get size(): number {
    return this.#spares.length;
  }

  /** Bytes of shared memory this pool made (waiting or lent): held for its life. */
  get madeBytes(): number {
    return this.#made * this.frameBytes;
  }

  /** `buffer` is a handle of memory this pool made. */
  owns(buffer: ArrayBufferLike): boolean {
    return buffer instanceof SharedArrayBuffer && this.#ours.has(buffer);
  }

  /**
   * Up to `count` spares, taken out for a split: those waiting, then new ones while fewer
   * than `maxSpares` are made. `made`: how many of them are new (memory not yet in use).
   */
  take(count: number): { buffers: SharedArrayBuffer[]; made: number } {
    const buffers = this.#spares.splice(Math.max(0, this.#spares.length - count));
    for (const buffer of buffers) this.#waiting.delete(buffer);
    let made = 0;
    while (buffers.length < count && this.#made < this.maxSpares) {
      const buffer = new SharedArrayBuffer(this.frameBytes);
      this.#ours.add(buffer);
      this.#made++;
      made++;
      buffers.push(buffer);
    }
    return { buffers, made };
  }

  /** `handle`, which the split's thread sent back for a spare it filled, stands for that spare's memory from now on. */
  adopt(handle: SharedArrayBuffer): void {
    if (handle.byteLength === this.frameBytes) this.#ours.add(handle);
  }

  /**
   * `buffer` will never come back (a push of its frame failed, and its socket may still be
   * reading it): the pool stops counting it, and may make another in its place. Its memory
   * is freed once the threads have collected their handles.
   */
  lose(buffer: ArrayBufferLike): void {
    if (!(buffer instanceof SharedArrayBuffer) || !this.#ours.has(buffer) || this.#waiting.has(buffer)) return;
    this.#ours.delete(buffer);
    this.#made--;
  }

  /**
   * A spare nothing reads or writes any more, for reuse. True when kept; a buffer this pool
   * did not make (an ordinary frame the thread allocated) is not, and left as it is.
   */
  give(buffer: ArrayBufferLike): boolean {
    if (!(buffer instanceof SharedArrayBuffer) || !this.#ours.has(buffer) || this.#waiting.has(buffer)) return false;
    this.#spares.push(buffer);
    this.#waiting.add(buffer);
    return true;
  }
}

/**
 * The frames of one split while its transfer pushes them: a frame comes back to the
 * spares once the transfer is done with it (`end`) and no push of it is under way. A
 * frame this worker's receiver took in comes back when the receiver says no record views
 * it (its `released` callback); a frame pushed to a peer, once the peer answered (all its
 * bytes were written). A frame whose push to a peer failed never comes back: its socket
 * may have been closed with the write under way (the pool may make another in its place).
 */
export class FrameLoan {
  readonly #spares: FrameSpares;
  /** Per frame buffer: pushes not yet done with it. */
  readonly #busy = new Map<ArrayBufferLike, number>();
  readonly #failed = new Set<ArrayBufferLike>();
  #ended = false;

  constructor(
    spares: FrameSpares,
    readonly frames: readonly (readonly Uint8Array[])[],
  ) {
    this.#spares = spares;
  }

  /** A push of `frame` starts; call the function it returns once, when the push is done with it. */
  push(frame: Uint8Array): (ok: boolean) => void {
    const buffer = frame.buffer;
    this.#busy.set(buffer, (this.#busy.get(buffer) ?? 0) + 1);
    let done = false;
    return (ok) => {
      if (done) return;
      done = true;
      if (!ok) this.#failed.add(buffer);
      const left = (this.#busy.get(buffer) ?? 1) - 1;
      if (left > 0) this.#busy.set(buffer, left);
      else {
        this.#busy.delete(buffer);
        if (this.#ended) this.#giveBack(buffer);
      }
    };
  }

  /** The transfer is done with these frames (pushed, or given up for a new split). */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    for (const list of this.frames) for (const frame of list) if (!this.#busy.has(frame.buffer)) this.#giveBack(frame.buffer);
  }

  #giveBack(buffer: ArrayBufferLike): void {
    if (this.#failed.has(buffer)) {
      this.#spares.lose(buffer);
      return;
    }
    // Nothing reads a frame given back: a spare goes back to the pool, and an ordinary
    // frame the thread allocated is freed now instead of costing the loop's collector.
    if (this.#spares.give(buffer) || this.#spares.owns(buffer)) return;
    if (buffer instanceof ArrayBuffer) releaseBuffers([buffer]);
  }
}
