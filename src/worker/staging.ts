/**
 * Shared memory that carries large task inputs to their threads.
 *
 * A thread gets its own copy of each large input (copy-inputs.ts). Made on the loop into a
 * fresh ArrayBuffer, that copy is memory V8 counts on the loop's heap as it is allocated:
 * with inputs of tens of MiB, a couple of them pass V8's external-memory limit, and V8
 * then starts a mark-compact and advances its marking on the loop as more arrive
 * (docs/benchmarks.md, Cluster). SharedArrayBuffer memory is counted by neither thread.
 * So the loop copies such an input into a staging buffer from this pool, the thread copies
 * it again into memory of its own before the task runs (the task sees an ordinary
 * ArrayBuffer-backed value, as before), and the staging buffer comes back to the pool once
 * the task's response is in.
 *
 * Shared memory is freed only once every thread holding it has collected its handle, so a
 * staging buffer is never dropped after one task: the pool keeps every buffer it made,
 * at most `maxBytes` of them in all, and an input that would pass that is copied as before.
 */
import { InvalidArgumentError } from '../errors.js';
import { sizeAbove, sizeClass } from '../runtime/sized-buffer-pool.js';
import { KEEP, replaceInPlace } from './value-walk.js';

/** Smaller inputs are copied as before: V8's count hardly moves for them, and a staged one costs a second copy. */
export const STAGE_MIN_BYTES = 1 << 20;

/** The smallest staging buffer made. */
const MIN_BUFFER_BYTES = 1 << 16;

export class StagingPool {
  readonly maxBytes: number;
  /** Spare buffers per size. */
  readonly #spare = new Map<number, SharedArrayBuffer[]>();
  /** Buffers lent out and not yet given back. */
  readonly #out = new WeakSet<SharedArrayBuffer>();
  #madeBytes = 0;
  /** Inputs staged (a spare reused or a buffer made), and those refused for want of room. */
  staged = 0;
  refused = 0;

  constructor(maxBytes: number) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new InvalidArgumentError(`a staging pool's maxBytes must be a non-negative whole number, got ${maxBytes}`);
    this.maxBytes = maxBytes;
  }

  /** Bytes of the buffers this pool made (lent out or spare): never freed while it lives. */
  get madeBytes(): number {
    return this.#madeBytes;
  }

  /**
   * A staging buffer of at least `bytes` (a spare, or a new one while the pool has room),
   * or undefined: the caller copies as before. Give it back once no thread reads it.
   */
  take(bytes: number): SharedArrayBuffer | undefined {
    if (!Number.isSafeInteger(bytes) || bytes < 0) throw new InvalidArgumentError(`a staging size is a non-negative whole number, got ${bytes}`);
    const size = sizeClass(bytes, MIN_BUFFER_BYTES);
    // A spare one size up will do too: inputs of one kind vary a little.
    const spare = this.#spare.get(size)?.pop() ?? this.#spare.get(sizeAbove(size))?.pop();
    if (spare !== undefined) {
      this.#out.add(spare);
      this.staged++;
      return spare;
    }
    if (this.#madeBytes + size > this.maxBytes) {
      this.refused++;
      return undefined;
    }
    const buffer = new SharedArrayBuffer(size);
    this.#madeBytes += size;
    this.#out.add(buffer);
    this.staged++;
    return buffer;
  }

  /** `buffer`, from `take`, is read by no thread any more. A buffer not lent out from here is ignored. */
  give(buffer: SharedArrayBuffer): void {
    if (!this.#out.has(buffer)) return;
    this.#out.delete(buffer);
    let list = this.#spare.get(buffer.byteLength);
    if (list === undefined) {
      list = [];
      this.#spare.set(buffer.byteLength, list);
    }
    list.push(buffer);
  }
}

/**
 * On the thread: `value` (the task's arguments) with every view of a staging buffer in
 * `staged` replaced by a copy of its own, of the same type, and the copies' buffers (which
 * the thread frees once the task is done, as it does its other input copies). An array
 * whose items all view one staging buffer (the frames of a value of a registered type,
 * laid out back to back) gets one copy of their span, the views at the same offsets in it,
 * so that decoding reads them in place. Arrays, plain objects, Maps and Sets are changed in
 * place: they are the message's, this thread's alone.
 */
export function unstage(value: unknown, staged: ReadonlySet<SharedArrayBuffer>): { value: unknown; copies: ArrayBuffer[] } {
  const copies: ArrayBuffer[] = [];
  const isStaged = (v: unknown): v is ArrayBufferView => ArrayBuffer.isView(v) && v.buffer instanceof SharedArrayBuffer && staged.has(v.buffer);
  // Views of one staging buffer, copied as the span they cover into one buffer of this thread's.
  const ownSpan = (views: readonly ArrayBufferView[]): ArrayBufferView[] => {
    let start = Infinity;
    let end = 0;
    for (const view of views) {
      start = Math.min(start, view.byteOffset);
      end = Math.max(end, view.byteOffset + view.byteLength);
    }
    const buffer = new ArrayBuffer(end - start);
    new Uint8Array(buffer).set(new Uint8Array(views[0].buffer, start, end - start));
    copies.push(buffer);
    return views.map((view) => viewAt(view, buffer, view.byteOffset - start));
  };
  const own = (v: object): unknown => {
    if (Array.isArray(v) && v.length > 0 && v.every((item) => isStaged(item) && item.buffer === (v[0] as ArrayBufferView).buffer)) return ownSpan(v as ArrayBufferView[]);
    return isStaged(v) ? ownSpan([v])[0] : KEEP;
  };
  return { value: replaceInPlace(value, own), copies };
}

/** A view of `like`'s type and length over `buffer` at `offset`. */
function viewAt(like: ArrayBufferView, buffer: ArrayBuffer, offset: number): ArrayBufferView {
  if (like instanceof DataView) return new DataView(buffer, offset, like.byteLength);
  const ctor = like.constructor as new (buffer: ArrayBuffer, byteOffset: number, length: number) => ArrayBufferView;
  return new ctor(buffer, offset, like.byteLength / (like as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT);
}
