/**
 * The split's input, copied for its thread into a buffer that comes back, when the store
 * keeps its own value (peers and other tasks may be reading it; an input the split reads
 * last that the store held alone is lent as it is instead: worker/consumed-inputs.ts).
 * Made fresh each time, that copy is ArrayBuffer memory allocated on the loop,
 * page-faulted in by the copy, then left to a collector. The split's input is a binary
 * value as often as not, and its copy is not part of the result: so the thread hands it
 * back (Executor.run's `lend`), and the next split of an input of the same size is copied
 * into it. The split's pieces are encoded into frames, copies, before the copy goes back;
 * moved back, the thread can no longer read it.
 */
import { InvalidArgumentError } from '../errors.js';
import { releaseBuffers } from '../runtime/buffer-release.js';
import { MOVE_MIN_BYTES, copyViewInto } from '../worker/copy-inputs.js';

/** Spare buffers of any size, taken by exact size; at most `maxBytes` of them, the oldest let go first. */
export class InputSpares {
  readonly #spares: ArrayBuffer[] = [];
  /** Spares waiting here: a buffer given twice is kept once. */
  readonly #waiting = new WeakSet<ArrayBuffer>();
  #bytes = 0;
  /** Copies made into a spare buffer vs into a new one. */
  reused = 0;
  allocated = 0;

  constructor(readonly maxBytes: number) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new InvalidArgumentError(`maxBytes must be a non-negative whole number, got ${maxBytes}`);
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** A spare of exactly `byteLength` is waiting. */
  has(byteLength: number): boolean {
    return this.#spares.some((b) => b.byteLength === byteLength);
  }

  /** A buffer of exactly `byteLength`: a spare, else a new one. */
  take(byteLength: number): ArrayBuffer {
    const at = this.#spares.findIndex((b) => b.byteLength === byteLength);
    if (at < 0) {
      this.allocated++;
      return new ArrayBuffer(byteLength);
    }
    const [buffer] = this.#spares.splice(at, 1);
    this.#waiting.delete(buffer);
    this.#bytes -= byteLength;
    this.reused++;
    return buffer;
  }

  /**
   * A buffer nothing reads or writes any more, for reuse; older spares go past maxBytes.
   * One not kept (larger than maxBytes, or let go for a newer one) is freed now: the giver
   * held it alone. True when kept.
   */
  give(buffer: ArrayBufferLike): boolean {
    if (!(buffer instanceof ArrayBuffer) || buffer.byteLength === 0 || this.#waiting.has(buffer)) return false;
    if (buffer.byteLength > this.maxBytes) {
      releaseBuffers([buffer]);
      return false;
    }
    this.#spares.push(buffer);
    this.#waiting.add(buffer);
    this.#bytes += buffer.byteLength;
    while (this.#bytes > this.maxBytes) {
      const oldest = this.#spares.shift() as ArrayBuffer;
      this.#waiting.delete(oldest);
      this.#bytes -= oldest.byteLength;
      releaseBuffers([oldest]);
    }
    return true;
  }

  /** Frees every spare (the worker has no shuffle running). */
  clear(): void {
    const spares = this.#spares.splice(0);
    for (const buffer of spares) this.#waiting.delete(buffer);
    this.#bytes = 0;
    releaseBuffers(spares);
  }
}

/**
 * `input` copied into a buffer of `spares`, to lend to the split's thread; undefined for an
 * input that is not one large binary view of memory of its own (shared memory is not
 * copied; other values take threadInputs' path).
 */
export async function lendableCopy(input: unknown, spares: InputSpares): Promise<{ value: ArrayBufferView; buffer: ArrayBuffer } | undefined> {
  if (!ArrayBuffer.isView(input) || input.byteLength < MOVE_MIN_BYTES || input.byteLength > spares.maxBytes || !(input.buffer instanceof ArrayBuffer)) return undefined;
  const buffer = spares.take(input.byteLength);
  try {
    return { value: await copyViewInto(input, buffer), buffer };
  } catch (err) {
    spares.give(buffer);
    throw err;
  }
}
