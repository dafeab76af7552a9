/**
 * Push frames for reuse. A split lays its pieces out in frames on a task thread, and the
 * frames move to the worker's loop to be pushed. Frames the worker is done with go back to
 * the next split, moved rather than left to the collector, and the thread lays that
 * split's frames out in them: memory already touched, where a fresh frame costs the
 * thread its page faults, and never garbage waiting in RSS for a collection. (V8 still
 * counts each frame that arrives on the loop toward its next mark-compact, as it counts
 * any ArrayBuffer memory that arrives: runtime/buffer-release.ts.)
 *
 * Ownership is exact: a frame comes back only once nothing reads it (FrameLoan), and a
 * spare is lent to one split at a time, which hands back what it did not fill.
 */
import { InvalidArgumentError } from '../errors.js';
import { releaseBuffers } from '../runtime/buffer-release.js';

/** Spare frame buffers of one size, at most `maxSpares` of them. */
export class FrameSpares {
  readonly #spares: ArrayBuffer[] = [];
  /** Spares waiting here: a buffer given twice is kept once. */
  readonly #waiting = new WeakSet<ArrayBuffer>();

  constructor(
    readonly frameBytes: number,
    readonly maxSpares: number,
  ) {
    if (!Number.isSafeInteger(frameBytes) || frameBytes <= 0) throw new InvalidArgumentError(`frameBytes must be a positive whole number, got ${frameBytes}`);
    if (!Number.isSafeInteger(maxSpares) || maxSpares < 0) throw new InvalidArgumentError(`maxSpares must be a non-negative whole number, got ${maxSpares}`);
  }

  get size(): number {
    return this.#spares.length;
  }

  /** `buffer` is waiting here as a spare. */
  holds(buffer: ArrayBufferLike): boolean {
    return buffer instanceof ArrayBuffer && this.#waiting.has(buffer);
  }

  /** Up to `count` spares, taken out (the caller lends them to a split). */
  take(count: number): ArrayBuffer[] {
    const taken = this.#spares.splice(Math.max(0, this.#spares.length - count));
    for (const buffer of taken) this.#waiting.delete(buffer);
    return taken;
  }

  /**
   * A buffer nothing reads or writes any more, for reuse. Not of frameBytes (a frame sized
   * to its records), detached, or past maxSpares: not kept, and left as it is (the caller
   * may offer it elsewhere; FrameLoan frees it). True when kept.
   */
  give(buffer: ArrayBufferLike): boolean {
    if (!(buffer instanceof ArrayBuffer) || buffer.byteLength !== this.frameBytes || this.#waiting.has(buffer)) return false;
    if (this.#spares.length >= this.maxSpares) return false;
    this.#spares.push(buffer);
    this.#waiting.add(buffer);
    return true;
  }

  /** Frees every spare (the worker has no shuffle running). */
  clear(): void {
    const spares = this.#spares.splice(0);
    for (const buffer of spares) this.#waiting.delete(buffer);
    releaseBuffers(spares);
  }
}

/**
 * The frames of one split while its transfer pushes them: a frame comes back to the
 * spares once the transfer is done with it (`end`) and no push of it is under way. A
 * frame this worker's receiver took in comes back when the receiver says no record views
 * it (its `released` callback); a frame pushed to a peer, once the peer answered (all its
 * bytes were written). A frame whose push to a peer failed never comes back: its socket
 * may have been closed with the write under way.
 */
export class FrameLoan {
  readonly #spares: FrameSpares;
  /** Per frame buffer: pushes not yet done with it. */
  readonly #busy = new Map<ArrayBuffer, number>();
  readonly #failed = new Set<ArrayBuffer>();
  #ended = false;

  constructor(
    spares: FrameSpares,
    readonly frames: readonly (readonly Uint8Array[])[],
  ) {
    this.#spares = spares;
  }

  /** A push of `frame` starts; call the function it returns once, when the push is done with it. */
  push(frame: Uint8Array): (ok: boolean) => void {
    const buffer = frame.buffer as ArrayBuffer;
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
    for (const list of this.frames) for (const frame of list) if (!this.#busy.has(frame.buffer as ArrayBuffer)) this.#giveBack(frame.buffer as ArrayBuffer);
  }

  #giveBack(buffer: ArrayBuffer): void {
    if (this.#failed.has(buffer)) return;
    // Nothing reads a frame given back: one not kept for reuse (sized to its records, or
    // past maxSpares) is freed now instead of costing the loop's collector.
    if (!this.#spares.give(buffer) && !this.#spares.holds(buffer)) releaseBuffers([buffer]);
  }
}
