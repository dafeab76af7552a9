import { binaryBytes, binaryTag, type BinaryValue } from './binary.js';
import { crc32c } from './checksum.js';
import { FIXED_PREFIX_BYTES, FORMAT_VERSION, HeaderKind, MAGIC, TRAILER_BYTES, align8 } from './format.js';

/**
 * A top-level binary value (typed array, Buffer, ArrayBuffer...) ready to be laid out in a
 * batch, without building its `Encoded`: spilling many small arrays, the plan, layout,
 * prefix buffer and arrays of `encode()` were a large share of the allocations per value.
 * The bytes are exactly `encode()`'s: one frame, a 1-byte header (the tag).
 */
export interface BinaryFrame {
  readonly tag: number;
  /** The value's own memory. */
  readonly frame: Uint8Array;
  /** Total encoded length, trailer included. */
  readonly byteLength: number;
}

/** Fixed fields, one frame length, the 1-byte header, padded to 8. */
const PREFIX_BYTES = align8(FIXED_PREFIX_BYTES + 8 + 1);

/** The value as a BinaryFrame, or undefined when it is not a binary payload. */
export function binaryFrameOf(value: unknown): BinaryFrame | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const tag = binaryTag(value);
  if (tag === 0) return undefined;
  const frame = binaryBytes(value as BinaryValue);
  return { tag, frame, byteLength: PREFIX_BYTES + align8(frame.byteLength) + TRAILER_BYTES };
}

/** Bytes `binaryPiecesSync` copies into the side buffer: all but a frame of at least `shareFrom` bytes. */
export function binaryCopiedBytes(value: BinaryFrame, shareFrom: number): number {
  return value.frame.byteLength >= shareFrom ? value.byteLength - value.frame.byteLength : value.byteLength;
}

/** Little-endian u32 into a byte array (no DataView per value). */
function putU32(out: Uint8Array, at: number, v: number): void {
  out[at] = v & 0xff;
  out[at + 1] = (v >>> 8) & 0xff;
  out[at + 2] = (v >>> 16) & 0xff;
  out[at + 3] = v >>> 24;
}

/**
 * `encodedPiecesSync` for a BinaryFrame: appends the value's pieces (the frame itself when
 * it has at least `shareFrom` bytes, else copied) and copies the rest into `side` at
 * `offset`; returns the offset after them. The caller checks `byteLength` against
 * SMALL_ENCODED_BYTES and gives `side` room for `binaryCopiedBytes`.
 */
export function binaryPiecesSync(value: BinaryFrame, side: Uint8Array, offset: number, shareFrom: number, pieces: Uint8Array[]): number {
  const { frame, tag } = value;
  const length = frame.byteLength;
  if (!Number.isSafeInteger(offset) || offset < 0 || offset + binaryCopiedBytes(value, shareFrom) > side.byteLength) {
    throw new RangeError(`no room at ${offset} in a side buffer of ${side.byteLength} bytes`);
  }
  let at = offset;
  putU32(side, at, MAGIC);
  side[at + 4] = FORMAT_VERSION;
  side[at + 5] = HeaderKind.Binary;
  side[at + 6] = side[at + 7] = 0;
  putU32(side, at + 8, 1); // header length
  putU32(side, at + 12, 1); // frame count
  putU32(side, at + 16, length % 0x1_0000_0000);
  putU32(side, at + 20, Math.floor(length / 0x1_0000_0000));
  side[at + 24] = tag;
  side.fill(0, at + 25, at + PREFIX_BYTES);
  at += PREFIX_BYTES;
  let start = offset;
  let crc: number;
  if (length >= shareFrom) {
    const run = side.subarray(start, at);
    crc = crc32c(frame, crc32c(run, 0));
    pieces.push(run);
    if (length > 0) pieces.push(frame);
    start = at;
  } else {
    side.set(frame, at);
    at += length;
    crc = 0;
  }
  const pad = align8(length) - length;
  for (let i = 0; i < pad; i++) side[at++] = 0;
  if (at > start) crc = crc32c(side.subarray(start, at), crc);
  putU32(side, at, crc >>> 0);
  putU32(side, at + 4, 0);
  at += TRAILER_BYTES;
  pieces.push(side.subarray(start, at));
  return at;
}
