import v8 from 'node:v8';
import { CodecError } from '../errors.js';
import { binaryTag } from './binary.js';
import { MAX_FRAMES } from './format.js';
import { packHeader, unpackHeader } from './msgpack.js';
import { TypedRef } from './plan.js';
import { type TypedParts, typeOf, typedParts } from './types.js';
import { FramingSerializer, type V8Serialized, deserializeWithFrames, readVarint, transferSharedFrames, writeWithFrames } from './v8-frames.js';

/**
 * The v8 header kind for values that hold values of registered types (v8-frames.ts for the
 * others). V8 writes a class instance as a plain object, its class lost, so such a value
 * is written through a copy of its arrays, plain objects, Maps, Sets and Errors with a
 * cause, in which each value of a registered type is a placeholder: an empty Uint8Array
 * only the encoder holds. Node's serializer hands every typed array to a host-object hook;
 * for a placeholder the hook writes, as the host object's payload,
 *
 *   TYPED_MARKER (varint), L (varint), then L bytes: a msgpackr header holding the value's
 *   TypedRef (type name, meta, first frame, frame count), as a msgpackr header would
 *
 * and the value's buffers become frames, written from its own memory. Node's own host
 * objects start with the index of a typed array class (a small number), and user data can
 * write no other, so user data never reads as a marker nor a marker as user data. One
 * placeholder stands for each value however often it is referenced, so shared references
 * and cycles stay so, through V8's own back-references.
 *
 * Before the value, the header holds one more host object, the envelope:
 *
 *   ENVELOPE_MARKER (varint), T (varint)
 *
 * Frames 0 to T-1 are the buffers of registered types; the SharedArrayBuffers follow, with
 * transfer ids T and on. A reader recognizes the envelope from the header's first bytes, so
 * it knows, before reading the value, which frames are SharedArrayBuffers (copied into new
 * ones) and which are buffers of registered types (views over the read bytes). A value
 * without registered types has no envelope: its header is v8-frames.ts's, byte for byte.
 */

/** The payload tags of Spillway's host objects: "SPT" and 0 or 1, far from Node's typed array indices. */
const ENVELOPE_MARKER = 0x5350_5400;
const TYPED_MARKER = 0x5350_5401;

/** V8's version tag, first byte of the header, and its tag for a host object. */
const VERSION_TAG = 0xff;
const HOST_OBJECT_TAG = 0x5c; // '\'

/** The host-object hooks Node's DefaultSerializer and DefaultDeserializer have; its typings leave them out. */
interface WritesHostObjects {
  _writeHostObject(view: ArrayBufferView): void;
}
interface ReadsHostObjects {
  _readHostObject(): unknown;
  _readRawBytes(length: number): number;
}

/**
 * Serializes a value that holds values of registered types; `typed` holds them encoded
 * (the plan's walk). Throws CodecError for what cannot be written.
 */
export function serializeTyped(value: unknown, typed: ReadonlyMap<object, TypedParts>): V8Serialized {
  const lifter = new Lifter(typed);
  const lifted = lifter.lift(value, 'value');
  const envelope = new Uint8Array(0);
  const serializer = new TypedSerializer(envelope, lifter.markers, lifter.frames.length);
  const { header, frames: shared } = writeWithFrames(serializer, [envelope, lifted]);
  return { header, frames: [...lifter.frames, ...shared] };
}

/** Deserializes any v8 header: with an envelope, through TypedDeserializer, else v8-frames.ts's way. */
export function deserializeV8(header: Uint8Array, frames: readonly Uint8Array[]): unknown {
  if (!startsWithEnvelope(header)) return deserializeWithFrames(header, frames);
  const deserializer = new TypedDeserializer(header, frames);
  deserializer.readHeader();
  deserializer.readValue(); // the envelope
  return deserializer.readValue() as unknown;
}

/** Whether the value's first host object, right after V8's version, is an envelope. */
function startsWithEnvelope(header: Uint8Array): boolean {
  if (header[0] !== VERSION_TAG) return false;
  let at = 1;
  while (at < header.byteLength && (header[at] & 0x80) !== 0) at++;
  at++;
  return header[at] === HOST_OBJECT_TAG && readVarint(header, at + 1) === ENVELOPE_MARKER;
}

class TypedSerializer extends FramingSerializer {
  constructor(
    private readonly envelope: Uint8Array,
    /** Each placeholder's TypedRef, packed. */
    private readonly markers: ReadonlyMap<object, Uint8Array>,
    private readonly typedFrames: number,
  ) {
    super(typedFrames);
  }

  _writeHostObject(view: ArrayBufferView): void {
    if (view === this.envelope) {
      this.writeUint32(ENVELOPE_MARKER);
      this.writeUint32(this.typedFrames);
      return;
    }
    const ref = this.markers.get(view);
    if (ref === undefined) {
      (v8.DefaultSerializer.prototype as unknown as WritesHostObjects)._writeHostObject.call(this, view);
      return;
    }
    this.writeUint32(TYPED_MARKER);
    this.writeUint32(ref.byteLength);
    this.writeRawBytes(ref);
  }
}

class TypedDeserializer extends v8.DefaultDeserializer {
  /** Frames 0 to T-1, once the envelope is read. */
  typedFrames: readonly Uint8Array[] | undefined;

  constructor(
    private readonly header: Uint8Array,
    private readonly frames: readonly Uint8Array[],
  ) {
    super(header);
  }

  _readHostObject(): unknown {
    const hooks = v8.DefaultDeserializer.prototype as unknown as ReadsHostObjects;
    // Looked at, not read: Node's own host objects read their tag themselves.
    const marker = readVarint(this.header, hooks._readRawBytes.call(this, 0));
    if (marker === ENVELOPE_MARKER) {
      this.readUint32();
      const count = this.readUint32();
      if (this.typedFrames !== undefined || count > this.frames.length) throw new RangeError('malformed v8 envelope');
      this.typedFrames = this.frames.slice(0, count);
      transferSharedFrames(this, this.frames, count);
      return {};
    }
    if (marker !== TYPED_MARKER) return hooks._readHostObject.call(this);
    this.readUint32();
    if (this.typedFrames === undefined) throw new RangeError('a typed value marker outside an envelope');
    const ref = this.readRawBytes(this.readUint32());
    const typed = unpackHeader(ref, this.typedFrames);
    if (typeof typed !== 'object' || typed === null) throw new RangeError('malformed typed value marker');
    return typed;
  }
}

/**
 * Copies the containers of a value, with each value of a registered type replaced by its
 * placeholder. Every container is copied (once: shared references and cycles stay so), so
 * a cycle never leads back to an original that still holds a value of a registered type.
 */
class Lifter {
  /** The buffers of the values of registered types, in order: frames 0 to T-1. */
  readonly frames: Uint8Array[] = [];
  readonly markers = new Map<object, Uint8Array>();
  readonly #copies = new Map<object, object>();

  constructor(private readonly typed: ReadonlyMap<object, TypedParts>) {}

  lift(value: unknown, path: string): unknown {
    if (typeof value !== 'object' || value === null) return value;
    const copy = this.#copies.get(value);
    if (copy !== undefined) return copy;
    const parts = this.typed.get(value);
    if (parts !== undefined) return this.placeholder(value, parts);
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto === Array.prototype) return this.array(value as unknown[], path);
    if (proto === Object.prototype || proto === null) return this.object(value as Record<string, unknown>, path);
    if (proto === Map.prototype) return this.map(value as Map<unknown, unknown>, path);
    if (proto === Set.prototype) return this.set(value as Set<unknown>, path);
    if (value instanceof Error) return this.error(value, path);
    if (!mayBeTyped(value, proto)) return value;
    // Where the plan's walk does not go (an array's other properties): encoded here.
    const type = typeOf(value);
    if (type === undefined) return value;
    return this.placeholder(value, typedParts(type, value, path));
  }

  private placeholder(value: object, parts: TypedParts): Uint8Array {
    const first = this.frames.length;
    if (first + parts.buffers.length > MAX_FRAMES) throw new CodecError(`cannot encode more than ${MAX_FRAMES} buffers of registered types in one value`);
    this.frames.push(...parts.buffers);
    const placeholder = new Uint8Array(0);
    this.markers.set(placeholder, packHeader(new TypedRef(parts.name, parts.meta, first, parts.buffers.length)));
    this.#copies.set(value, placeholder);
    return placeholder;
  }

  private array(array: unknown[], path: string): unknown[] {
    // slice keeps the holes of a sparse array; its other own properties are added below.
    const copy = array.slice();
    this.#copies.set(array, copy);
    for (const key of Object.keys(array)) {
      const item = (array as unknown as Record<string, unknown>)[key];
      const lifted = this.lift(item, `${path}[${key}]`);
      if (isArrayIndex(key)) {
        if (lifted !== item) copy[Number(key)] = lifted;
      } else define(copy, key, lifted);
    }
    return copy;
  }

  private object(object: Record<string, unknown>, path: string): Record<string, unknown> {
    const copy = Object.create(Object.getPrototypeOf(object) as object | null) as Record<string, unknown>;
    this.#copies.set(object, copy);
    for (const key of Object.keys(object)) define(copy, key, this.lift(object[key], `${path}.${key}`));
    return copy;
  }

  private map(map: Map<unknown, unknown>, path: string): Map<unknown, unknown> {
    const copy = new Map<unknown, unknown>();
    this.#copies.set(map, copy);
    for (const [key, item] of map) copy.set(this.lift(key, `${path}<key>`), this.lift(item, `${path}.get(...)`));
    return copy;
  }

  private set(set: Set<unknown>, path: string): Set<unknown> {
    const copy = new Set<unknown>();
    this.#copies.set(set, copy);
    for (const item of set) copy.add(this.lift(item, `${path}<item>`));
    return copy;
  }

  /** An Error with a cause is copied (a real Error, with the same prototype and own properties); without one it holds no values. */
  private error(error: Error, path: string): Error {
    const descriptors = Object.getOwnPropertyDescriptors(error) as Record<string, PropertyDescriptor>;
    const cause = descriptors.cause;
    if (cause === undefined || !('value' in cause)) return error;
    const copy = new Error();
    Object.setPrototypeOf(copy, Object.getPrototypeOf(error) as object | null);
    this.#copies.set(error, copy);
    cause.value = this.lift(cause.value, `${path}.cause`);
    // Node 22 and later give an Error's stack as an accessor that reads the instance it is
    // on: copied as it is, it would give the copy's own stack, made here.
    const stack = descriptors.stack;
    if (stack !== undefined && !('value' in stack)) descriptors.stack = { value: error.stack, writable: true, enumerable: false, configurable: true };
    Object.defineProperties(copy, descriptors);
    return copy;
  }
}

/** Whether the plan's walk would take `value` (neither a container nor an Error) for a value of a registered type. */
function mayBeTyped(value: object, proto: unknown): boolean {
  return !(
    binaryTag(value) !== 0 ||
    proto === Date.prototype ||
    value instanceof RegExp ||
    value instanceof Number ||
    value instanceof String ||
    value instanceof Boolean
  );
}

function isArrayIndex(key: string): boolean {
  const n = Number(key);
  return Number.isInteger(n) && n >= 0 && n < 0xffff_ffff && String(n) === key;
}

/** An own data property, even for the key `__proto__` (an assignment would set the prototype). Shared with the worker's value walks. */
export function define(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}
