/**
 * The registry of value types: classes whose instances the codec encodes as a small
 * header plus binary buffers, so that spilling, transfer and `sizeof` treat them like
 * typed arrays (their bytes written from the value's own memory, read back as views).
 */
import { InvalidArgumentError, TypeRegistrationError } from '../errors.js';
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

const byClass = new Map<unknown, { cls: unknown; entry: TypeEntry }>();
const byName = new Map<string, { cls: unknown; entry: TypeEntry }>();

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
 * The registered type of `value` (its class's, or the nearest registered ancestor's), the
 * built-in type of an Apache Arrow value, or undefined.
 */
export function typeOf(value: object): TypeEntry | undefined {
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
