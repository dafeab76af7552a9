/**
 * How a task's inputs reach its thread. Posted as they are, binary inputs are structured
 * cloned: V8 serializes every byte into a message buffer that grows by doubling, and the
 * thread deserializes them into a copy of its own, so a task briefly costs up to 3× its
 * inputs. Instead each large binary input is copied once into a fresh ArrayBuffer that is
 * *transferred* (moved) to the thread: one memcpy on the loop and 1× memory,
 * which the thread frees when it collects (runtime/thread-collector.ts). An input of a MiB
 * or more crosses in one of the worker's staging buffers instead when one is to spare, and
 * the thread copies it out (staging.ts). The store's own value is not handed over, as
 * peers and other tasks may be reading it, but for an input the task reads last that the
 * store holds alone (consumed-inputs.ts), lent as it is.
 *
 * The bytes are copied in steps, with a loop turn every couple of milliseconds: one copy
 * of a whole partition (page faults of the fresh buffer, CPU contention on a loaded host)
 * would be the longest single block of a shuffle worker's loop. The
 * inputs stay put meanwhile: the worker pins them until the task ends, and values are
 * never mutated.
 */
import { InvalidArgumentError } from '../errors.js';
import { Slicer } from '../loop.js';
import { STAGE_MIN_BYTES } from './staging.js';
import { needsLift } from './large-views.js';
import { LOOP_BRAND, crossing, partsOf } from './typed-crossing.js';

/** Smaller binary inputs are cloned: Node's pooled Buffer slabs cannot move, and tiny copies cost nothing. */
export const MOVE_MIN_BYTES = 64 * 1024;
/** Bytes copied per step; the loop gets a turn once the steps have run for COPY_SLICE_MS. */
const COPY_STEP_BYTES = 256 * 1024;
const COPY_SLICE_MS = 2;

export interface ThreadInputs {
  args: unknown[];
  /** Buffers to transfer with the message. */
  transfer: ArrayBuffer[];
  /** Bytes copied for the transfer. */
  copiedBytes: number;
  /** Some view ends past 4 GiB: it must be lifted out of the message (large-views.ts). */
  largeViews: boolean;
  /** Values of registered types, replaced by their crossing form (typed-crossing.ts). */
  typedValues: number;
  /** Staging buffers the copies went into (shared, not moved): the thread copies them again (staging.ts). */
  staged: SharedArrayBuffer[];
}

const NONE_LENT: ReadonlySet<ArrayBuffer> = new Set();

type TypedArrayConstructor = new (length: number) => ArrayBufferView & { set(source: ArrayLike<number> | ArrayLike<bigint>): void };

/**
 * Bytes to copy: from a value into the buffer that will be transferred. Kept as buffer and
 * offset, viewed one step at a time: a Uint8Array holds at most 2^32 bytes on Node 20, and
 * a value may be larger (a Float64Array of 5 GiB is fine).
 */
type CopyJob = readonly [from: ArrayBufferLike, fromOffset: number, to: ArrayBufferLike, byteLength: number, toOffset?: number];

const alignUp = (n: number): number => (n + 7) & ~7;

/**
 * Copies large typed arrays and ArrayBuffers inside arrays, plain objects, Maps and Sets
 * into buffers to transfer (containers are copied too, the values in them are not touched).
 * A value of a registered type is replaced by its crossing form (typed-crossing.ts, marked
 * with `brand`), its encoded buffers copied into one fresh buffer, 8-byte aligned each as
 * the value format lays frames out, so the thread decodes it in place.
 *
 * With `stage`, a typed array or DataView of STAGE_MIN_BYTES or more, and a value of a
 * registered type whose buffers come to that much, is copied into the staging buffer it
 * returns, when it returns one (staging.ts), instead of a fresh buffer.
 */
export async function threadInputs(
  args: readonly unknown[],
  brand: string = LOOP_BRAND,
  lent: ReadonlySet<ArrayBuffer> = NONE_LENT,
  stage?: (bytes: number) => SharedArrayBuffer | undefined,
): Promise<ThreadInputs> {
  const jobs: CopyJob[] = [];
  const staged: SharedArrayBuffer[] = [];
  // Lent buffers move as they are: the caller gave them up until the thread hands them back.
  const transfer: ArrayBuffer[] = [...lent];
  let copiedBytes = 0;
  let largeViews = false;
  let typedValues = 0;
  const seen = new Map<object, unknown>();
  const visit = (value: unknown): unknown => {
    if (typeof value !== 'object' || value === null) return value;
    if (seen.has(value)) return seen.get(value);
    let out: unknown = value;
    if (ArrayBuffer.isView(value)) {
      // SharedArrayBuffer-backed values are shared as they are: no copy at all.
      if (value.byteLength >= MOVE_MIN_BYTES && !(value.buffer instanceof SharedArrayBuffer) && !lent.has(value.buffer as ArrayBuffer)) {
        const staging = stage !== undefined && value.byteLength >= STAGE_MIN_BYTES && !needsLift(value) ? stage(value.byteLength) : undefined;
        const copy = staging === undefined ? emptyCopyOf(value, jobs) : stagedCopyOf(value, staging, jobs);
        if (staging === undefined) transfer.push(copy.buffer as ArrayBuffer);
        else staged.push(staging);
        copiedBytes += value.byteLength;
        out = copy;
      }
      // Known here, in the walk this needs anyway: lifting walks the value again only then.
      if (needsLift(out as ArrayBufferView)) largeViews = true;
    } else if (value instanceof ArrayBuffer) {
      if (value.byteLength >= MOVE_MIN_BYTES && !lent.has(value)) {
        const copy = new ArrayBuffer(value.byteLength);
        jobs.push([value, 0, copy, value.byteLength]);
        transfer.push(copy);
        copiedBytes += value.byteLength;
        out = copy;
      }
    } else if (Array.isArray(value)) {
      const copy = new Array<unknown>(value.length);
      seen.set(value, copy); // before the items: a cycle stays a cycle
      for (let i = 0; i < value.length; i++) copy[i] = visit(value[i]);
      return copy;
    } else if (value instanceof Map) {
      const copy = new Map<unknown, unknown>();
      seen.set(value, copy);
      for (const [k, v] of value) copy.set(visit(k), visit(v));
      return copy;
    } else if (value instanceof Set) {
      const copy = new Set<unknown>();
      seen.set(value, copy);
      for (const v of value) copy.add(visit(v));
      return copy;
    } else if (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null) {
      const copy = Object.create(Object.getPrototypeOf(value) as object | null) as Record<string, unknown>;
      seen.set(value, copy);
      for (const [k, v] of Object.entries(value)) Object.defineProperty(copy, k, { value: visit(v), writable: true, enumerable: true, configurable: true });
      return copy;
    } else {
      const parts = partsOf(value);
      if (parts !== undefined) {
        const total = parts.buffers.reduce((sum, b) => sum + alignUp(b.byteLength), 0);
        // Staged as a large typed array is: the thread copies the span out before decoding.
        const staging = stage !== undefined && total >= STAGE_MIN_BYTES ? stage(total) : undefined;
        const buffer = staging ?? new ArrayBuffer(total);
        let at = 0;
        const views = parts.buffers.map((b) => {
          if (b.byteLength > 0) jobs.push([b.buffer, b.byteOffset, buffer, b.byteLength, at]);
          const view = new Uint8Array(buffer, at, b.byteLength);
          at += alignUp(b.byteLength);
          return view;
        });
        // Small ones are cloned with the message: Node's pooled slabs and tiny moves cost more.
        if (staging !== undefined) staged.push(staging);
        else if (total >= MOVE_MIN_BYTES) transfer.push(buffer as ArrayBuffer);
        copiedBytes += total;
        typedValues++;
        out = crossing(brand, { ...parts, buffers: views });
      }
    }
    seen.set(value, out);
    return out;
  };
  const copied = args.map(visit);
  await copyInSteps(jobs);
  return { args: copied, transfer, copiedBytes, largeViews, typedValues, staged };
}

/**
 * A copy of `view` in `buffer` (exactly its size, one the caller holds alone, to lend to a
 * thread), of the type a structured clone would make, copied in steps as threadInputs does.
 */
export async function copyViewInto(view: ArrayBufferView, buffer: ArrayBuffer): Promise<ArrayBufferView> {
  if (buffer.byteLength !== view.byteLength) throw new InvalidArgumentError(`a copy of a view of ${view.byteLength} bytes needs a buffer of that size, got ${buffer.byteLength}`);
  await copyInSteps([[view.buffer, view.byteOffset, buffer, view.byteLength]]);
  return viewOver(view, buffer);
}

/**
 * A view of `view`'s type over the whole of `buffer`, the type a structured clone would
 * make (a Buffer's as a Uint8Array): for memory a thread copied or handed back.
 */
export function viewOver(view: ArrayBufferView, buffer: ArrayBuffer): ArrayBufferView {
  if (view instanceof DataView) return new DataView(buffer);
  const ctor = (Buffer.isBuffer(view) ? Uint8Array : view.constructor) as new (buffer: ArrayBuffer) => ArrayBufferView;
  return new ctor(buffer);
}

async function copyInSteps(jobs: readonly CopyJob[]): Promise<void> {
  const slicer = new Slicer(COPY_SLICE_MS);
  for (const [from, fromOffset, to, byteLength, toOffset = 0] of jobs) {
    for (let at = 0; at < byteLength; at += COPY_STEP_BYTES) {
      if (slicer.due()) await slicer.turn();
      const n = Math.min(COPY_STEP_BYTES, byteLength - at);
      new Uint8Array(to, toOffset + at, n).set(new Uint8Array(from, fromOffset + at, n));
    }
  }
}

/** A view of `view`'s type (a Buffer's as a Uint8Array) at the start of `staging`; its bytes are queued in `jobs`. */
function stagedCopyOf(view: ArrayBufferView, staging: SharedArrayBuffer, jobs: CopyJob[]): ArrayBufferView {
  jobs.push([view.buffer, view.byteOffset, staging, view.byteLength]);
  if (view instanceof DataView) return new DataView(staging, 0, view.byteLength);
  const ctor = (Buffer.isBuffer(view) ? Uint8Array : view.constructor) as new (buffer: SharedArrayBuffer, byteOffset: number, length: number) => ArrayBufferView;
  const bytesPerElement = (view as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT;
  return new ctor(staging, 0, view.byteLength / bytesPerElement);
}

/**
 * A view with a buffer of its own, of the type a structured clone would make; its bytes
 * are queued in `jobs`, to be copied.
 */
function emptyCopyOf(view: ArrayBufferView, jobs: CopyJob[]): ArrayBufferView {
  if (view instanceof DataView) {
    const buffer = new ArrayBuffer(view.byteLength);
    jobs.push([view.buffer, view.byteOffset, buffer, view.byteLength]);
    return new DataView(buffer);
  }
  // A Buffer arrives in a thread as a Uint8Array either way.
  const ctor = (Buffer.isBuffer(view) ? Uint8Array : view.constructor) as TypedArrayConstructor;
  const bytesPerElement = (view as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT;
  const copy = new ctor(view.byteLength / bytesPerElement);
  jobs.push([view.buffer, view.byteOffset, copy.buffer as ArrayBuffer, view.byteLength]);
  return copy;
}
