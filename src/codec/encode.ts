import { constants as bufferConstants } from 'node:buffer';
import { CodecError, errorMessage } from '../errors.js';
import { binaryBytes, binaryTag, type BinaryValue } from './binary.js';
import { CHECKSUM_SLICE_BYTES, ValueHasher, xxh64 } from './checksum.js';
import { HeaderKind, type Layout, TRAILER_BYTES, bodyStart, layoutOf, writeChecksum, writePrefix } from './format.js';
import { packHeader } from './msgpack.js';
import { planEncoding } from './plan.js';
import { serializeWithFrames } from './v8-frames.js';
import { serializeTyped } from './v8-typed.js';

/**
 * A value laid out in the format, before its checksum: a small prefix (fixed fields,
 * frame table, header, padding) and the frames, which are views over the value's own
 * memory. Nothing large is copied; the checksum is computed while the bytes are written.
 */
export interface Encoded {
  readonly layout: Layout;
  /** The prefix in a buffer of its own (made on first use: batches of small values write it in place instead). */
  readonly prefix: Buffer;
  readonly header: Uint8Array;
  readonly frames: readonly Uint8Array[];
  /** Total encoded length, trailer included. */
  readonly byteLength: number;
}

abstract class LaidOut implements Encoded {
  #prefix: Buffer | undefined;
  constructor(
    readonly layout: Layout,
    readonly header: Uint8Array,
  ) {}

  abstract get frames(): readonly Uint8Array[];

  get byteLength(): number {
    return this.layout.totalLength;
  }

  get prefix(): Buffer {
    if (this.#prefix === undefined) {
      // Zero-filled: the header's padding must be zeros.
      this.#prefix = Buffer.alloc(bodyStart(this.layout));
      writePrefix(this.#prefix, 0, this.layout, this.header);
    }
    return this.#prefix;
  }
}

class EncodedValue extends LaidOut {
  constructor(
    layout: Layout,
    header: Uint8Array,
    readonly frames: readonly Uint8Array[],
  ) {
    super(layout, header);
  }
}

/**
 * A binary value at the top: its one frame kept as is. The array of frames the interface
 * promises is made only if a generic path asks for it; batches of small values never do.
 */
class BinaryEncoded extends LaidOut {
  #frames: readonly Uint8Array[] | undefined;
  constructor(
    layout: Layout,
    header: Uint8Array,
    readonly frame: Uint8Array,
  ) {
    super(layout, header);
  }

  get frames(): readonly Uint8Array[] {
    return (this.#frames ??= [this.frame]);
  }
}

export const ZERO_PAD = Buffer.alloc(8);

/** Headers of binary values: one byte, the tag; never written to, so one per tag is shared. */
const binaryHeaders = new Map<number, Uint8Array>();
/** The last binary layout: many small values share one length, and a layout is immutable. */
let lastBinaryLayout: Layout | undefined;

/**
 * A binary value (a typed array, Buffer, DataView or ArrayBuffer at the top) is one raw
 * frame: the common case of many small values, laid out with two objects (the frame's view
 * and the BinaryEncoded) instead of ten.
 */
function encodeBinary(value: BinaryValue, tag: number): BinaryEncoded {
  let header = binaryHeaders.get(tag);
  if (header === undefined) binaryHeaders.set(tag, (header = Uint8Array.of(tag)));
  // The length first: the bytes of a value too long to encode cannot even be viewed.
  const length = value.byteLength;
  let layout = lastBinaryLayout;
  if (layout === undefined || layout.frameLengths[0] !== length) {
    layout = layoutOf(HeaderKind.Binary, 1, [length]);
    checkEncodedLength(layout, value);
    Object.freeze(layout.frameOffsets);
    Object.freeze(layout.frameLengths);
    lastBinaryLayout = Object.freeze(layout);
  }
  return new BinaryEncoded(layout, header, binaryBytes(value));
}

/**
 * The longest encoded value: what one Buffer holds (buffer.constants.MAX_LENGTH, 4 GiB on
 * Node 20). A tier reads a value back into one buffer, and the codec views each frame as
 * one Uint8Array (at most 2^32 bytes on Node 20): a longer value could be written but
 * never read back. Refused instead, with a CodecError: the value stays in memory.
 */
export const MAX_ENCODED_BYTES = bufferConstants.MAX_LENGTH;

export function checkEncodedLength(layout: Layout, value: unknown, limit = MAX_ENCODED_BYTES): void {
  if (layout.totalLength > limit) {
    const what = typeof value === 'object' && value !== null ? (value.constructor?.name ?? 'value') : typeof value;
    throw new CodecError(
      `cannot encode a ${what}: encoded, it would take ${layout.totalLength} bytes, over the limit of ${limit} (buffer.constants.MAX_LENGTH: the most one buffer can hold to read it back)`,
    );
  }
}

/** Lays a value out in the format. Throws CodecError for what cannot be encoded. */
export function encode(value: unknown): Encoded {
  let kind: HeaderKind;
  let header: Uint8Array;
  let frames: Uint8Array[];
  try {
    // The common case first, without the plan object planEncoding would make for it.
    if (typeof value === 'object' && value !== null) {
      const tag = binaryTag(value);
      if (tag !== 0) return encodeBinary(value as BinaryValue, tag);
    }
    const plan = planEncoding(value);
    switch (plan.kind) {
      case 'binary':
        // Taken above already; kept so that the switch covers every plan.
        return encodeBinary(plan.value, plan.tag);
      case 'msgpack':
        kind = HeaderKind.Msgpack;
        header = packHeader(plan.template);
        // The lengths first: the bytes of a value too long to encode cannot even be viewed.
        checkEncodedLength(layoutOf(kind, header.byteLength, plan.frames.map((f) => f.byteLength)), value);
        frames = plan.frames.map(binaryBytes);
        break;
      case 'v8':
        kind = HeaderKind.V8;
        ({ header, frames } = plan.typed.size > 0 ? serializeTyped(plan.value, plan.typed) : serializeWithFrames(plan.value));
        break;
    }
  } catch (err) {
    if (err instanceof CodecError) throw err;
    throw new CodecError(`cannot encode value: ${errorMessage(err)}`, { cause: err });
  }
  const layout = layoutOf(kind, header.byteLength, frames.map((f) => f.byteLength));
  checkEncodedLength(layout, value);
  return new EncodedValue(layout, header, frames);
}

/** The pieces of an encoded value in order, trailer excluded, padding included. */
function* pieces(encoded: Encoded): Generator<Uint8Array> {
  yield encoded.prefix;
  for (const frame of encoded.frames) {
    if (frame.byteLength > 0) yield frame;
    const pad = (8 - (frame.byteLength % 8)) % 8;
    if (pad > 0) yield ZERO_PAD.subarray(0, pad);
  }
}

/**
 * Yields the encoded bytes in batches of at most `batchBytes` (for writev), computing the
 * checksum of each batch just before yielding it. A consumer that asks for the next batch
 * while the previous one is being written overlaps hashing with I/O; the last batch
 * carries the trailer. Large frames are cut into slices (views, not copies). Every batch
 * but the last holds exactly `batchBytes` bytes.
 */
export async function* encodedBatches(
  encoded: Encoded,
  batchBytes = CHECKSUM_SLICE_BYTES,
): AsyncGenerator<Uint8Array[], void, undefined> {
  yield* encodedBatchesSync(encoded, batchBytes);
}

/** What `encodedBatches` yields, one synchronous step per batch (so a step can be timed alone). */
export function encodedBatchesSync(encoded: Encoded, batchBytes = CHECKSUM_SLICE_BYTES): Generator<Uint8Array[], void, undefined> {
  return batchesOf(pieces(encoded), encoded.layout.trailerOffset, batchBytes);
}

/**
 * Yields `pieces` (an encoded value's bytes up to its trailer) in batches of at most
 * `batchBytes`, each hashed just before it is yielded, the trailer's checksum in the last.
 */
export function* batchesOf(pieces: Iterable<Uint8Array>, trailerOffset: number, batchBytes: number): Generator<Uint8Array[], void, undefined> {
  // 0, a fraction or NaN would loop forever on empty slices (or cut at fractional offsets).
  if (!Number.isSafeInteger(batchBytes) || batchBytes < 1) {
    throw new RangeError(`batchBytes must be a positive integer, got ${batchBytes}`);
  }
  const hasher = new ValueHasher(trailerOffset);
  let batch: Uint8Array[] = [];
  let batchLength = 0;
  /** Appends `piece` to the current batch, yielding each batch it fills. */
  function* cut(piece: Uint8Array, hash: boolean): Generator<Uint8Array[]> {
    for (let offset = 0; offset < piece.byteLength; ) {
      const take = Math.min(piece.byteLength - offset, batchBytes - batchLength);
      const slice = offset === 0 && take === piece.byteLength ? piece : piece.subarray(offset, offset + take);
      if (hash) hasher.update(slice);
      batch.push(slice);
      batchLength += take;
      offset += take;
      if (batchLength === batchBytes) {
        yield batch;
        batch = [];
        batchLength = 0;
      }
    }
  }
  for (const piece of pieces) yield* cut(piece, true);
  const trailer = Buffer.alloc(TRAILER_BYTES);
  writeChecksum(trailer, 0, hasher.digest());
  // The trailer is cut like any other piece: every batch but the last holds exactly `batchBytes`.
  yield* cut(trailer, false);
  if (batchLength > 0) yield batch;
}

/** Encoded values up to this size are laid out in one buffer in one synchronous step. */
export const SMALL_ENCODED_BYTES = 64 * 1024;

/**
 * Lays a small encoded value out in one contiguous buffer, checksum included, in one
 * synchronous step (a copy of at most SMALL_ENCODED_BYTES). For many small values this is
 * much cheaper than the batch generator; large values must use encodedBatches.
 */
export function encodedBytesSync(encoded: Encoded): Buffer {
  // allocUnsafeSlow: its own memory, 8-byte aligned, so frames can be viewed in place.
  const out = Buffer.allocUnsafeSlow(encoded.byteLength);
  writeEncodedSync(encoded, out, 0);
  return out;
}

/**
 * Lays a small encoded value out in `out` at `offset`, checksum included, and returns its
 * length: what `encodedBytesSync` does, without a buffer per value (a batch of small values
 * shares one). Same limit of SMALL_ENCODED_BYTES; `out` must have room.
 */
export function writeEncodedSync(encoded: Encoded, out: Uint8Array, offset: number): number {
  // Every frame copied (none shared): the layout and checksum are encodedPiecesSync's.
  return encodedPiecesSync(encoded, out, offset, Infinity, []) - offset;
}

/** Bytes of `encoded` that `encodedPiecesSync` copies: all but frames of at least `shareFrom` bytes. */
export function copiedBytesOf(encoded: Encoded, shareFrom: number): number {
  if (encoded instanceof BinaryEncoded) {
    const frameBytes = encoded.frame.byteLength;
    return frameBytes >= shareFrom ? encoded.byteLength - frameBytes : encoded.byteLength;
  }
  let shared = 0;
  for (const frame of encoded.frames) if (frame.byteLength >= shareFrom) shared += frame.byteLength;
  return encoded.byteLength - shared;
}

/**
 * The pieces of a small encoded value, checksum included, ready for a writev, appended to
 * `pieces`: frames of at least `shareFrom` bytes are views of the value's own memory (not
 * copied); the prefix, padding, smaller frames and the trailer are copied into `side` at
 * `offset`, adjacent bytes in one piece. Returns the offset in `side` after them. Meant for
 * many small values sharing one `side` buffer: no buffer, and no large copy, per value.
 */
export function encodedPiecesSync(encoded: Encoded, side: Uint8Array, offset: number, shareFrom: number, pieces: Uint8Array[]): number {
  checkRoom(encoded, side, offset, shareFrom);
  const cursor: SideCursor = { at: offset, runStart: offset };
  lay(encoded, side, cursor, shareFrom, pieces);
  pieces.push(side.subarray(cursor.runStart, cursor.at));
  return cursor.at;
}

/**
 * Many small encoded values laid out back to back for one writev, as `encodedPiecesSync`
 * lays out one, except that the copied bytes between two shared frames form one piece even
 * across values (a value's trailer and the next one's prefix): n binary values of a few KiB
 * are 2n + 1 pieces (3n one by one), and no array of pieces per value.
 */
export class PackedLayout {
  readonly #pieces: Uint8Array[] = [];
  readonly #side: Uint8Array;
  readonly #cursor: SideCursor = { at: 0, runStart: 0 };

  /** `sideBytes`: the sum of `copiedBytesOf(encoded, shareFrom)` over the values to come. */
  constructor(
    sideBytes: number,
    private readonly shareFrom: number,
  ) {
    this.#side = new Uint8Array(sideBytes);
  }

  /** Appends a value (at most SMALL_ENCODED_BYTES); RangeError if the side buffer has no room for it. */
  add(encoded: Encoded): void {
    checkRoom(encoded, this.#side, this.#cursor.at, this.shareFrom);
    lay(encoded, this.#side, this.#cursor, this.shareFrom, this.#pieces);
  }

  /** The pieces of every value added, in order. */
  pieces(): Uint8Array[] {
    const cursor = this.#cursor;
    if (cursor.at > cursor.runStart) {
      this.#pieces.push(this.#side.subarray(cursor.runStart, cursor.at));
      cursor.runStart = cursor.at;
    }
    return this.#pieces;
  }
}

function checkRoom(encoded: Encoded, side: Uint8Array, offset: number, shareFrom: number): void {
  if (encoded.byteLength > SMALL_ENCODED_BYTES) throw new RangeError(`values laid out in a side buffer are at most ${SMALL_ENCODED_BYTES} bytes`);
  if (!Number.isSafeInteger(offset) || offset < 0 || offset + copiedBytesOf(encoded, shareFrom) > side.byteLength) {
    throw new RangeError(`no room at ${offset} in a side buffer of ${side.byteLength} bytes`);
  }
}

/** Where the next copied byte goes in a side buffer, and where the copied run not yet made a piece starts. */
interface SideCursor {
  at: number;
  runStart: number;
}

/**
 * Lays a value out at `cursor.at`: pushes each shared frame, after the copied run before it
 * (from `cursor.runStart`); leaves the run after the last shared frame open, for the caller
 * to close or the next value to extend.
 */
function lay(encoded: Encoded, side: Uint8Array, cursor: SideCursor, shareFrom: number, pieces: Uint8Array[]): void {
  if (encoded instanceof BinaryEncoded) {
    const frame = encoded.frame;
    if (frame.byteLength >= shareFrom && frame.byteLength > 0 && frame.byteLength % 8 === 0) {
      layBinary(encoded, frame, side, cursor, pieces);
      return;
    }
  }
  const frames = encoded.frames;
  // The hasher splits prefix and body itself; each part given whole is one native call.
  const hasher = new ValueHasher(encoded.layout.trailerOffset);
  let at = cursor.at + writePrefix(side, cursor.at, encoded.layout, encoded.header);
  hasher.update(side.subarray(cursor.at, at));
  // The bytes copied into `side` not hashed yet start here; shared frames are hashed in place.
  let start = at;
  for (const frame of frames) {
    // An empty frame has nothing to share: no empty piece for the writev.
    if (frame.byteLength >= shareFrom && frame.byteLength > 0) {
      if (at > start) hasher.update(side.subarray(start, at));
      if (at > cursor.runStart) pieces.push(side.subarray(cursor.runStart, at));
      hasher.update(frame);
      pieces.push(frame);
      start = cursor.runStart = at;
    } else {
      side.set(frame, at);
      at += frame.byteLength;
    }
    const pad = (8 - (frame.byteLength % 8)) % 8;
    for (let i = 0; i < pad; i++) side[at++] = 0;
  }
  if (at > start) hasher.update(side.subarray(start, at));
  cursor.at = writeChecksum(side, at, hasher.digest());
}

/**
 * The prefix of the last binary layout, laid out once, with its digest. Small binary
 * values of one type and length (the common case of a batch) share a layout and a header:
 * each then copies its prefix and hashes only its frame (seeded with that digest), instead of writing the prefix field
 * by field and hashing it, a large share of a small value's cost.
 */
let lastPrefix: { layout: Layout; header: Uint8Array; bytes: Uint8Array; seed: bigint } | undefined;

/** `lay` for a binary value whose one frame is shared and needs no padding. */
function layBinary(encoded: Encoded, frame: Uint8Array, side: Uint8Array, cursor: SideCursor, pieces: Uint8Array[]): void {
  let prefix = lastPrefix;
  if (prefix === undefined || prefix.layout !== encoded.layout || prefix.header !== encoded.header) {
    const bytes = new Uint8Array(bodyStart(encoded.layout));
    writePrefix(bytes, 0, encoded.layout, encoded.header);
    prefix = lastPrefix = { layout: encoded.layout, header: encoded.header, bytes, seed: xxh64(bytes, 0n) };
  }
  side.set(prefix.bytes, cursor.at);
  const at = cursor.at + prefix.bytes.byteLength;
  pieces.push(side.subarray(cursor.runStart, at), frame);
  cursor.runStart = at;
  cursor.at = writeChecksum(side, at, xxh64(frame, prefix.seed));
}

/** Encodes a value into one contiguous buffer (small values, tests, the wire for tiny keys). */
export async function encodeToBuffer(value: unknown): Promise<Buffer> {
  const encoded = encode(value);
  if (encoded.byteLength <= SMALL_ENCODED_BYTES) return encodedBytesSync(encoded);
  const out = Buffer.allocUnsafeSlow(encoded.byteLength);
  let offset = 0;
  for await (const batch of encodedBatches(encoded)) {
    for (const piece of batch) {
      out.set(piece, offset);
      offset += piece.byteLength;
    }
  }
  return out;
}
