/**
 * A few I/O buffers of one size, lent out and taken back. A consumer hands a buffer back
 * once its bytes have left (the socket wrote them), and the next read fills it again.
 *
 * Why: V8 frees an ArrayBuffer's memory only when its collector runs, and it lets many
 * of them pile up before it runs for that reason alone. Reading every served piece into a
 * fresh buffer would make that pile the largest item in a busy worker's RSS.
 */
export class BufferPool {
  readonly #spare: Buffer[] = [];
  /** Buffers out on loan: only these come back, and only once (a second give is ignored). */
  readonly #lent = new WeakSet<ArrayBuffer>();

  constructor(
    readonly bufferBytes: number,
    readonly maxSpare: number,
  ) {}

  /** A buffer of `bytes` (at most `bufferBytes`) at offset 0 of a pooled allocation. */
  take(bytes: number): Buffer {
    if (bytes > this.bufferBytes) throw new RangeError(`asked for ${bytes} bytes from a pool of ${this.bufferBytes}-byte buffers`);
    // allocUnsafeSlow: a buffer of its own (not a slice of Node's shared slab), so it can be lent.
    const buffer = this.#spare.pop() ?? Buffer.allocUnsafeSlow(this.bufferBytes);
    this.#lent.add(buffer.buffer as ArrayBuffer);
    return buffer.subarray(0, bytes);
  }

  /** Takes back a chunk that `take` lent; anything else is left to the collector. */
  give(chunk: Uint8Array): void {
    const memory = chunk.buffer;
    if (!(memory instanceof ArrayBuffer) || !this.#lent.has(memory)) return;
    this.#lent.delete(memory);
    if (this.#spare.length < this.maxSpare) this.#spare.push(Buffer.from(memory, 0, this.bufferBytes));
  }

  /** Buffers waiting to be lent again. */
  get spareCount(): number {
    return this.#spare.length;
  }
}
