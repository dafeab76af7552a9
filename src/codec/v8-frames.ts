import v8 from 'node:v8';
import { CodecError } from '../errors.js';
import { MAX_FRAMES } from './format.js';

/**
 * The v8 header kind with SharedArrayBuffers carried out of band, as frames.
 *
 * `v8.serialize` refuses a SharedArrayBuffer, and Node's deserializer cannot take one back
 * from V8's own tag for it (`'u'` and an id: Node gives V8 no way to look the id up). It
 * can take one back as a transferred buffer (`'t'` and an id, resolved by
 * `transferArrayBuffer`), so the header names each SharedArrayBuffer that way: transfer id
 * i is frame i, whose bytes the decoder copies into a new SharedArrayBuffer. Everything
 * else is written by Node's DefaultSerializer unchanged, so a value without
 * SharedArrayBuffers has exactly the bytes of `v8.serialize`, and no frames. (A value
 * holding values of registered types is v8-typed.ts's: it puts their buffers first.)
 *
 * Views over a SharedArrayBuffer (typed arrays, Buffers, DataViews) are not frames: the
 * DefaultSerializer writes the bytes a view covers into the header, as every other path
 * of the codec carries a view, and they decode as views over memory of their own.
 */

/** V8's tag for a SharedArrayBuffer, followed by the id the serializer's delegate gave it. */
const SHARED_ARRAY_BUFFER_TAG = 0x75; // 'u'
/** V8's tag for an ArrayBuffer transferred out of band, followed by its transfer id. */
const TRANSFERRED_ARRAY_BUFFER_TAG = 0x74; // 't'

/** What `serializeWithFrames` gives: the header, and frame i (a view over the SharedArrayBuffer with transfer id i). */
export interface V8Serialized {
  readonly header: Buffer;
  readonly frames: Uint8Array[];
}

/**
 * Node's DefaultSerializer that gives each SharedArrayBuffer an id (its frame index) and
 * cuts its buffer there: V8 writes the tag and the id right after asking for the id, so each
 * cut leaves that tag as the first byte of the next piece, where it can be rewritten
 * without parsing V8's format.
 */
export class FramingSerializer extends v8.DefaultSerializer {
  /** The SharedArrayBuffers met so far, in order: the one with id `firstId + i` is `shared[i]`. */
  readonly shared: SharedArrayBuffer[] = [];
  /** The output cut off so far, one piece per SharedArrayBuffer tag V8 writes (the last piece is still in the serializer). */
  readonly pieces: Buffer[] = [];
  /** The id V8 writes after the tag that starts each piece after the first. */
  readonly cutIds: number[] = [];
  readonly #ids = new Map<SharedArrayBuffer, number>();

  /** `firstId`: the frame index of the first SharedArrayBuffer (the frames before it are v8-typed.ts's). */
  constructor(readonly firstId = 0) {
    super();
  }

  /** Called by V8 for the first reference to each SharedArrayBuffer; later ones are back-references. */
  _getSharedArrayBufferId(buffer: SharedArrayBuffer): number {
    let id = this.#ids.get(buffer);
    if (id === undefined) {
      id = this.firstId + this.shared.length;
      if (id >= MAX_FRAMES) throw new CodecError(`cannot encode more than ${MAX_FRAMES} frames (SharedArrayBuffers, buffers of registered types) in one value`);
      this.shared.push(buffer);
      this.#ids.set(buffer, id);
    }
    this.pieces.push(this.releaseBuffer());
    this.cutIds.push(id);
    return id;
  }
}

/** Serializes as `v8.serialize` does, with each SharedArrayBuffer named by its frame index. */
export function serializeWithFrames(value: unknown): V8Serialized {
  return writeWithFrames(new FramingSerializer(), [value]);
}

/**
 * Writes the header and `values` in order with `serializer`; returns the header and the
 * frames of its SharedArrayBuffers (frame i of the result has id `firstId + i`).
 */
export function writeWithFrames(serializer: FramingSerializer, values: readonly unknown[]): V8Serialized {
  serializer.writeHeader();
  for (const value of values) serializer.writeValue(value);
  const last = serializer.releaseBuffer();
  const { pieces, cutIds } = serializer;
  // Views over the buffers' own memory, as a msgpackr value's frames are: nothing is copied.
  const frames = serializer.shared.map((buffer) => new Uint8Array(buffer));
  if (pieces.length === 0) return { header: last, frames };
  pieces.push(last);
  for (let i = 1; i < pieces.length; i++) {
    const piece = pieces[i];
    // Checked, not assumed: a V8 that wrote anything else there must fail the encode, not
    // write a header no reader can take back.
    if (piece[0] !== SHARED_ARRAY_BUFFER_TAG || readVarint(piece, 1) !== cutIds[i - 1]) {
      throw new CodecError('cannot encode a SharedArrayBuffer: the v8 serializer wrote it in an unexpected form');
    }
    piece[0] = TRANSFERRED_ARRAY_BUFFER_TAG;
  }
  return { header: Buffer.concat(pieces), frames };
}

/** A LEB128 u32 as V8 writes ids; -1 if `bytes` ends inside it or it is longer than 5 bytes. */
export function readVarint(bytes: Uint8Array, at: number): number {
  let value = 0;
  for (let shift = 0; shift < 35 && at < bytes.byteLength; shift += 7) {
    const byte = bytes[at++];
    value += (byte & 0x7f) * 2 ** shift;
    if ((byte & 0x80) === 0) return value;
  }
  return -1;
}

/**
 * Rebuilds a value `serializeWithFrames` wrote: each frame becomes a new SharedArrayBuffer
 * holding a copy of its bytes (shared memory cannot be a view over the read buffer), handed
 * to the deserializer as the buffer with that transfer id. With no frames, this is
 * `v8.deserialize`.
 */
export function deserializeWithFrames(header: Uint8Array, frames: readonly Uint8Array[]): unknown {
  if (frames.length === 0) return v8.deserialize(header);
  const deserializer = new v8.DefaultDeserializer(header);
  deserializer.readHeader();
  transferSharedFrames(deserializer, frames, 0);
  return deserializer.readValue() as unknown;
}

/** Hands `deserializer` frames `first`.. as new SharedArrayBuffers (copies), each with its index as transfer id. */
export function transferSharedFrames(deserializer: v8.Deserializer, frames: readonly Uint8Array[], first: number): void {
  for (let id = first; id < frames.length; id++) {
    const buffer = new SharedArrayBuffer(frames[id].byteLength);
    new Uint8Array(buffer).set(frames[id]);
    // Node takes a SharedArrayBuffer here too; its typings only say ArrayBuffer.
    deserializer.transferArrayBuffer(id, buffer as unknown as ArrayBuffer);
  }
}
