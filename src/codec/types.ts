/**
 * The registry of value types: classes whose instances the codec encodes as a small
 * header plus binary buffers, so that spilling, transfer and `sizeof` treat them like
 * typed arrays (their bytes written from the value's own memory, read back as views).
 */
import { CodecError, InvalidArgumentError, TypeDecodeError, TypeRegistrationError, UnknownTypeError, errorMessage } from '../errors.js';
import { arrowTypeNamed, arrowTypeOf } from './arrow.js';

/** What a type's `encode` returns: plain data to keep beside the buffers, and the buffers. */
export interface EncodedParts {
  /** Plain data (numbers, strings, arrays, objects) needed to rebuild the value; kept in the header. */
  readonly meta?: unknown;
  /** The value's binary contents, written as they are (views of its own memory are best). */
  readonly buffers: readonly ArrayBufferView[];
}

/** What `decode` is given: the `meta` that `encode` returned, and its buffers as views over the read bytes. */
export interface DecodedParts {
  readonly meta: unknown;
  readonly buffers: readonly Uint8Array[];
}

/** How instances of one class become bytes and come back. */
export interface ValueType<T extends object> {
  /**
   * The name written with every encoded value: a process that reads the value must have a
   * type registered under the same name (register it from a module every worker loads).
   */
  readonly name: string;
  encode(value: T): EncodedParts;
  decode(parts: DecodedParts): T;
  /** Bytes the value holds in memory; by default the sum of the buffers `encode` returns. */
  sizeof?(value: T): number;
}

/** A class, abstract or not, whose instances a ValueType encodes. */
export type ValueClass<T extends object> = abstract new (...args: never[]) => T;

/** A registered type as the codec uses it. */
export interface TypeEntry {
  readonly name: string;
  encode(value: object): EncodedParts;
  decode(parts: DecodedParts): object;
  sizeof(value: object): number;
}

const REGISTRY = Symbol.for('spillway.valueTypes');

interface Registry {
  readonly byClass: Map<unknown, { cls: unknown; entry: TypeEntry }>;
  readonly byName: Map<string, { cls: unknown; entry: TypeEntry }>;
}

/**
 * One registry per thread, shared by every copy of Spillway loaded in it: a task module
 * bundled with its own copy, or given its own instance by a loader (tsx does so in task
 * threads), registers types the worker's copy must know.
 */
const registry: Registry = ((globalThis as unknown as Record<symbol, Registry | undefined>)[REGISTRY] ??= { byClass: new Map(), byName: new Map() });
const { byClass, byName } = registry;

/** Names the built-in types use; an application cannot take them. */
const RESERVED_PREFIX = 'spillway.';

/**
 * Registers how instances of `cls` (and of its subclasses) are encoded. Registering the
 * same class under the same name again does nothing (a module loaded twice); a name or a
 * class already registered with a different partner throws TypeRegistrationError.
 */
export function registerType<T extends object>(cls: ValueClass<T>, type: ValueType<T>): void {
  if (typeof cls !== 'function') throw new InvalidArgumentError(`registerType: the class must be a constructor, got ${typeof cls}`);
  if (typeof type !== 'object' || type === null) throw new InvalidArgumentError('registerType: the type must be an object with name, encode and decode');
  const { name, encode, decode, sizeof } = type;
  if (typeof name !== 'string' || name.length === 0 || name.length > 256) {
    throw new InvalidArgumentError(`registerType: name must be a string of 1 to 256 characters, got ${typeof name === 'string' ? JSON.stringify(name) : typeof name}`);
  }
  if (name.startsWith(RESERVED_PREFIX)) throw new InvalidArgumentError(`registerType: names starting with "${RESERVED_PREFIX}" are Spillway's own (got "${name}")`);
  if (typeof encode !== 'function' || typeof decode !== 'function' || (sizeof !== undefined && typeof sizeof !== 'function')) {
    throw new InvalidArgumentError(`registerType "${name}": encode and decode must be functions, and sizeof a function when given`);
  }
  addType(cls, makeEntry(type as unknown as ValueType<object>));
}

function addType(cls: unknown, entry: TypeEntry): void {
  const named = byName.get(entry.name);
  const classed = byClass.get(cls);
  if (named !== undefined && named.cls === cls) return;
  if (named !== undefined) {
    throw new TypeRegistrationError(`the type name "${entry.name}" is already registered for the class ${className(named.cls)}, not ${className(cls)}`);
  }
  if (classed !== undefined) {
    throw new TypeRegistrationError(`the class ${className(cls)} is already registered as "${classed.entry.name}", not "${entry.name}"`);
  }
  const record = { cls, entry };
  byName.set(entry.name, record);
  byClass.set(cls, record);
}

function makeEntry(type: ValueType<object>): TypeEntry {
  return {
    name: type.name,
    encode: (value) => type.encode(value),
    decode: (parts) => type.decode(parts),
    sizeof:
      type.sizeof !== undefined
        ? (value) => type.sizeof!(value)
        : (value) => type.encode(value).buffers.reduce((sum, buffer) => sum + buffer.byteLength, 0),
  };
}

/**
 * A value of a registered or built-in type held as its encoded parts, not decoded: what a
 * worker's event loop holds for values made by its task threads and for values read from
 * disk or a peer (task modules load in the threads, not on the loop). It encodes back to
 * the same name, meta and buffers, so it is spilled, sent and counted like the value
 * itself; a task thread gets the decoded value.
 */
export class EncodedTypedValue {
  constructor(
    readonly name: string,
    readonly meta: unknown,
    readonly buffers: readonly Uint8Array[],
  ) {}
}

const encodedEntries = new Map<string, TypeEntry>();

function encodedEntryOf(value: EncodedTypedValue): TypeEntry {
  let entry = encodedEntries.get(value.name);
  if (entry === undefined) {
    entry = {
      name: value.name,
      encode: (v) => ({ meta: (v as EncodedTypedValue).meta, buffers: (v as EncodedTypedValue).buffers }),
      decode: () => {
        throw new TypeError('an EncodedTypedValue entry does not decode');
      },
      sizeof: (v) => (v as EncodedTypedValue).buffers.reduce((sum, buffer) => sum + buffer.byteLength, 0),
    };
    encodedEntries.set(value.name, entry);
  }
  return entry;
}

let keepEncoded = false;

/**
 * Whether decoding a value of a registered or built-in type (Apache Arrow) gives an
 * EncodedTypedValue instead of the value: a worker's event loop, which holds values for
 * others, keeps every such value encoded, so it never runs a type's code nor loads the
 * modules a type needs (apache-arrow alone is about 150 of them), and hands the bytes to a
 * task thread as they are. Elsewhere (an application) a value of a type this process has not
 * registered is an UnknownTypeError.
 */
export function keepTypedValuesEncoded(keep: boolean): void {
  keepEncoded = keep;
}

/** How a value of the type `name` is rebuilt: its decoded value, or an EncodedTypedValue (see keepTypedValuesEncoded). */
export function decodeTyped(name: string, parts: DecodedParts): object {
  if (keepEncoded) return new EncodedTypedValue(name, parts.meta, parts.buffers);
  const type = typeNamed(name);
  if (type === undefined) throw new UnknownTypeError(name);
  try {
    return type.decode(parts);
  } catch (err) {
    throw new TypeDecodeError(name, err);
  }
}

/**
 * `type.encode(value)`, checked: a throw becomes a CodecError naming the type and `path`, and
 * what it returns must be `{ meta, buffers }` with buffers an array of views.
 */
export function encodeParts(type: TypeEntry, value: object, path: string): { meta: unknown; buffers: ArrayBufferView[] } {
  let parts: EncodedParts;
  try {
    parts = type.encode(value);
  } catch (err) {
    if (err instanceof CodecError) throw err;
    throw new CodecError(`the type "${type.name}" cannot encode the value at ${path}: ${errorMessage(err)}`, { cause: err });
  }
  const buffers: unknown = parts?.buffers;
  if (!Array.isArray(buffers) || !buffers.every((b) => ArrayBuffer.isView(b))) {
    throw new CodecError(`the type "${type.name}" must encode a value as { meta, buffers } with buffers an array of typed arrays or Buffers (at ${path})`);
  }
  return { meta: parts.meta ?? null, buffers: buffers as ArrayBufferView[] };
}

/** A value of a registered type encoded: its type's name, meta, and buffers as byte views of the value's own memory. */
export interface TypedParts {
  readonly name: string;
  readonly meta: unknown;
  readonly buffers: readonly Uint8Array[];
}

/** `value` (of the registered `type`) encoded by its type, its buffers viewed as bytes (no copy). */
export function typedParts(type: TypeEntry, value: object, path: string): { name: string; meta: unknown; buffers: Uint8Array[] } {
  const { meta, buffers } = encodeParts(type, value, path);
  return { name: type.name, meta, buffers: buffers.map((b) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength)) };
}

/**
 * The registered type of `value` (its class's, or the nearest registered ancestor's), the
 * built-in type of an Apache Arrow value, or undefined.
 */
export function typeOf(value: object): TypeEntry | undefined {
  if (value instanceof EncodedTypedValue) return encodedEntryOf(value);
  if (byClass.size > 0) {
    for (let proto: unknown = Object.getPrototypeOf(value); proto !== null && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
      const record = byClass.get((proto as { constructor?: unknown }).constructor);
      if (record !== undefined) return record.entry;
    }
  }
  return arrowTypeOf(value);
}

/** The type registered under `name`, or undefined. */
export function typeNamed(name: string): TypeEntry | undefined {
  return byName.get(name)?.entry ?? arrowTypeNamed(name);
}

function className(cls: unknown): string {
  return typeof cls === 'function' && cls.name !== '' ? cls.name : '(anonymous class)';
}
