import { FormatError } from '../errors.js';

/**
 * The one encoding Spillway uses on disk and on the wire (docs/protocol.md#value-format):
 *
 *   0   4  magic "SPWY"
 *   4   1  format version (2)
 *   5   1  header kind: 0 binary, 1 msgpackr, 2 v8 serializer
 *   6   2  reserved, zero
 *   8   4  header length H (u32 LE)
 *  12   4  frame count F (u32 LE)
 *  16  8F  frame lengths (u64 LE)
 *  ..   H  header, then zero padding to a multiple of 8
 *  ..      each frame, zero padded to a multiple of 8 (so typed arrays can view it in place)
 *  end  8  trailer: the checksum of every byte before it (u64 LE): XXH64 of the prefix (all
 *          before the first frame, or before the trailer when there is none), then XXH64 of
 *          the rest seeded with that digest (checksum.ts, which says why not a CRC-32C).
 *
 * What the frames hold depends on the header kind:
 * - binary: exactly one frame, the payload's bytes; the header is its binary tag;
 * - msgpackr: one frame per binary payload (or per buffer of a registered type),
 *   named by index from the header's frame references;
 * - v8: one frame per SharedArrayBuffer in the value, each once however often the value
 *   refers to it. The header is Node's v8 serializer output in which SharedArrayBuffer i
 *   is written as an ArrayBuffer transferred out of band with transfer id i (v8-frames.ts);
 *   with no SharedArrayBuffer there are no frames and the header is `v8.serialize`'s.
 *   A value holding values of registered types starts with an envelope host object, and
 *   each such value is a marker host object whose buffers are frames, before the
 *   SharedArrayBuffers' (v8-typed.ts).
 */
export const MAGIC = 0x59575053; // "SPWY" read as u32 LE
export const FORMAT_VERSION = 2;
export const FIXED_PREFIX_BYTES = 16;
export const TRAILER_BYTES = 8;
/** Refuse absurd frame tables before allocating anything for them. */
export const MAX_FRAMES = 1 << 20;

export enum HeaderKind {
  Binary = 0,
  Msgpack = 1,
  V8 = 2,
}

export interface Layout {
  readonly headerKind: HeaderKind;
  readonly headerOffset: number;
  readonly headerLength: number;
  readonly frameOffsets: readonly number[];
  readonly frameLengths: readonly number[];
  /** Offset of the trailer; the checksum covers [0, trailerOffset). */
  readonly trailerOffset: number;
  readonly totalLength: number;
}

export function align8(n: number): number {
  // Not `(n + 7) & ~7`: bit operations wrap above 2 GiB.
  return Math.ceil(n / 8) * 8;
}

export function prefixLength(frameCount: number): number {
  return FIXED_PREFIX_BYTES + 8 * frameCount;
}

/** Where the body (the first frame, or the trailer when there is none) starts: align8(16 + 8F + H). */
export function bodyOffset(frameCount: number, headerLength: number): number {
  return align8(prefixLength(frameCount) + headerLength);
}

/** Builds the layout from lengths; used by the encoder and the parser alike. */
export function layoutOf(headerKind: HeaderKind, headerLength: number, frameLengths: readonly number[]): Layout {
  const headerOffset = prefixLength(frameLengths.length);
  let offset = bodyOffset(frameLengths.length, headerLength);
  const frameOffsets: number[] = [];
  for (const length of frameLengths) {
    frameOffsets.push(offset);
    offset += align8(length);
  }
  return {
    headerKind,
    headerOffset,
    headerLength,
    frameOffsets,
    frameLengths,
    trailerOffset: offset,
    totalLength: offset + TRAILER_BYTES,
  };
}

/** `bodyOffset` read off a built layout: where the checksum's prefix part ends. */
export function bodyStart(layout: Layout): number {
  return layout.frameOffsets[0] ?? layout.trailerOffset;
}

const scratch = new BigUint64Array(1);
const scratchBytes = new Uint8Array(scratch.buffer);
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Writes a checksum as the u64 LE trailer at `at`; returns the offset after it. */
export function writeChecksum(out: Uint8Array, at: number, checksum: bigint): number {
  // Through a typed array, not a DataView per call: this runs once per spilled value.
  scratch[0] = checksum;
  for (let i = 0; i < 8; i++) out[at + i] = scratchBytes[LITTLE_ENDIAN ? i : 7 - i];
  return at + TRAILER_BYTES;
}

/** The checksum a trailer at `at` holds. */
export function readChecksum(bytes: Uint8Array, at: number): bigint {
  return new DataView(bytes.buffer, bytes.byteOffset + at, TRAILER_BYTES).getBigUint64(0, true);
}

/** Little-endian u32 into a byte array (no DataView or Buffer needed). */
function putU32(out: Uint8Array, at: number, n: number): void {
  out[at] = n & 0xff;
  out[at + 1] = (n >>> 8) & 0xff;
  out[at + 2] = (n >>> 16) & 0xff;
  out[at + 3] = n >>> 24;
}

/**
 * Writes a value's prefix (fixed fields, frame table, header, zero padding up to the first
 * frame) into `out` at `at`; returns its length. Works on any byte array, so a batch of
 * small values writes every prefix into one shared buffer.
 */
export function writePrefix(out: Uint8Array, at: number, layout: Layout, header: Uint8Array): number {
  const lengths = layout.frameLengths;
  const end = at + (layout.frameOffsets[0] ?? layout.trailerOffset);
  putU32(out, at, MAGIC);
  out[at + 4] = FORMAT_VERSION;
  out[at + 5] = layout.headerKind;
  out[at + 6] = out[at + 7] = 0;
  putU32(out, at + 8, header.byteLength);
  putU32(out, at + 12, lengths.length);
  for (let i = 0; i < lengths.length; i++) {
    // A u64 as two u32 halves: lengths are safe integers, and no BigInt per frame.
    putU32(out, at + FIXED_PREFIX_BYTES + 8 * i, lengths[i] % 0x1_0000_0000);
    putU32(out, at + FIXED_PREFIX_BYTES + 8 * i + 4, Math.floor(lengths[i] / 0x1_0000_0000));
  }
  out.set(header, at + layout.headerOffset);
  out.fill(0, at + layout.headerOffset + header.byteLength, end);
  return end - at;
}

/**
 * How many bytes of prefix are needed to know the layout: 16 first, then 16 + 8F.
 * Returns the layout once `bytes` holds the whole frame table.
 */
export function parseLayout(bytes: Uint8Array, maxTotalLength = Number.MAX_SAFE_INTEGER): Layout | number {
  if (bytes.byteLength < FIXED_PREFIX_BYTES) return FIXED_PREFIX_BYTES;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== MAGIC) throw new FormatError('not a Spillway value: bad magic');
  const version = view.getUint8(4);
  if (version !== FORMAT_VERSION) throw new FormatError(`unsupported format version ${version}`);
  const kind = view.getUint8(5);
  if (kind > HeaderKind.V8) throw new FormatError(`unknown header kind ${kind}`);
  const headerLength = view.getUint32(8, true);
  const frameCount = view.getUint32(12, true);
  if (frameCount > MAX_FRAMES) throw new FormatError(`too many frames: ${frameCount}`);
  if (kind === HeaderKind.Binary && frameCount !== 1) throw new FormatError('a binary value has exactly one frame');
  const needed = prefixLength(frameCount);
  // Checked before asking for the frame table: a corrupt count or header length must not
  // make a streaming reader wait for (or allocate) bytes the value cannot have.
  if (needed + headerLength + TRAILER_BYTES > maxTotalLength) {
    throw new FormatError(`${frameCount} frames and a ${headerLength}-byte header exceed the limit of ${maxTotalLength} bytes`);
  }
  if (bytes.byteLength < needed) return needed;
  const frameLengths: number[] = [];
  for (let i = 0; i < frameCount; i++) {
    const length = view.getBigUint64(FIXED_PREFIX_BYTES + 8 * i, true);
    if (length > BigInt(maxTotalLength)) throw new FormatError(`frame ${i} is too long: ${length} bytes`);
    frameLengths.push(Number(length));
  }
  const layout = layoutOf(kind as HeaderKind, headerLength, frameLengths);
  if (layout.totalLength > maxTotalLength) {
    throw new FormatError(`value of ${layout.totalLength} bytes exceeds the limit of ${maxTotalLength}`);
  }
  return layout;
}
