import { isArrayBuffer, isSharedArrayBuffer } from 'node:util/types';

/**
 * Binary payloads travel as raw frames. Each kind has a stable tag (part of the format)
 * and is rebuilt as a view over the bytes it arrives in, never copied element by element.
 */
export type BinaryValue = ArrayBufferView | ArrayBuffer | SharedArrayBuffer;

type ViewConstructor = new (buffer: ArrayBufferLike, byteOffset: number, length: number) => ArrayBufferView;

const VIEW_KINDS: ReadonlyArray<readonly [number, ViewConstructor, number]> = [
  [2, Uint8Array, 1],
  [3, Uint8ClampedArray, 1],
  [4, Int8Array, 1],
  [5, Uint16Array, 2],
  [6, Int16Array, 2],
  [7, Uint32Array, 4],
  [8, Int32Array, 4],
  [9, Float32Array, 4],
  [10, Float64Array, 8],
  [11, BigInt64Array, 8],
  [12, BigUint64Array, 8],
];

export const enum BinaryTag {
  Buffer = 1,
  DataView = 13,
  ArrayBuffer = 14,
  SharedArrayBuffer = 15,
}

const tagByConstructor = new Map<unknown, number>(VIEW_KINDS.map(([tag, ctor]) => [ctor, tag]));
const kindByTag = new Map(VIEW_KINDS.map(([tag, ctor, bytes]) => [tag, { ctor, bytes }]));

/** The view constructor looked up last and its tag: a store sees runs of one kind (asked twice a value). */
let lastCtor: unknown;
let lastTag = 0;

/** The tag for a binary value, or 0 if `value` is not one we carry as a raw frame. */
export function binaryTag(value: object): number {
  // `constructor` only tells which kind: any object can carry one of its own
  // ({ constructor: Buffer } is a plain object), so the kind must also be real.
  const ctor = value.constructor;
  if (ArrayBuffer.isView(value)) {
    if (ctor === Buffer) return BinaryTag.Buffer;
    if (ctor === lastCtor) return lastTag;
    const tag = tagByConstructor.get(ctor);
    if (tag !== undefined) {
      lastCtor = ctor;
      lastTag = tag;
      return tag;
    }
    return ctor === DataView ? BinaryTag.DataView : 0;
  }
  if (ctor === ArrayBuffer) return isArrayBuffer(value) ? BinaryTag.ArrayBuffer : 0;
  if (ctor === SharedArrayBuffer) return isSharedArrayBuffer(value) ? BinaryTag.SharedArrayBuffer : 0;
  return 0;
}

/** The bytes of a binary value, as a view over its own memory. */
export function binaryBytes(value: BinaryValue): Uint8Array {
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  return new Uint8Array(value);
}

export function isKnownTag(tag: number): boolean {
  return tag === BinaryTag.Buffer || kindByTag.has(tag) || (tag >= BinaryTag.DataView && tag <= BinaryTag.SharedArrayBuffer);
}

/**
 * Rebuilds a binary value over `frame`. Views need `frame.byteOffset` aligned to the
 * element size; the format pads frames to 8 bytes, so only a misaligned container
 * buffer (rare: pooled network chunks) costs one copy.
 */
export function restoreBinary(tag: number, frame: Uint8Array): BinaryValue {
  switch (tag) {
    case BinaryTag.Buffer:
      return Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength);
    case BinaryTag.DataView:
      return new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
    case BinaryTag.ArrayBuffer: {
      // An ArrayBuffer cannot be a view; one memcpy gives it memory of its own.
      const copy = new ArrayBuffer(frame.byteLength);
      new Uint8Array(copy).set(frame);
      return copy;
    }
    case BinaryTag.SharedArrayBuffer: {
      const copy = new SharedArrayBuffer(frame.byteLength);
      new Uint8Array(copy).set(frame);
      return copy;
    }
  }
  const kind = kindByTag.get(tag);
  if (kind === undefined) throw new RangeError(`unknown binary tag ${tag}`);
  let bytes = frame;
  if (bytes.byteOffset % kind.bytes !== 0) bytes = Uint8Array.prototype.slice.call(frame) as Uint8Array;
  if (bytes.byteLength % kind.bytes !== 0) throw new RangeError(`frame of ${bytes.byteLength} bytes is not a whole number of elements`);
  return new kind.ctor(bytes.buffer, bytes.byteOffset, bytes.byteLength / kind.bytes);
}
