import { CodecError } from '../errors.js';
import { binaryTag, type BinaryValue } from './binary.js';
import { type TypeEntry, type TypedParts, typeOf, typedParts } from './types.js';

/** Stands in a msgpackr header for a binary payload carried as frame `index`. */
export class FrameRef {
  constructor(
    readonly index: number,
    readonly tag: number,
  ) {}
}

/** Stands in a msgpackr header for a value of a registered type: its name, meta, and `count` frames from `first`. */
export class TypedRef {
  constructor(
    readonly name: string,
    readonly meta: unknown,
    readonly first: number,
    readonly count: number,
  ) {}
}

export type EncodingPlan =
  | { readonly kind: 'binary'; readonly value: BinaryValue; readonly tag: number }
  | { readonly kind: 'msgpack'; readonly template: unknown; readonly frames: readonly BinaryValue[] }
  /** `typed`: the values of registered types in `value`, each encoded once (empty when none). */
  | { readonly kind: 'v8'; readonly value: unknown; readonly typed: ReadonlyMap<object, TypedParts> };

/**
 * Decides how a value is encoded, in one walk:
 * - a binary payload at the top is a single raw frame;
 * - plain data goes to msgpackr, with binary payloads inside it swapped for FrameRefs;
 * - anything msgpackr would not give back exactly (-0, sparse arrays, shared or cyclic
 *   references, ill-formed strings, RegExp, Error, boxed primitives) goes to v8, with the
 *   values of registered types in it, already encoded, for v8-typed.ts to carry;
 * - what neither can carry (functions, symbols, class instances) is a CodecError.
 */
export function planEncoding(value: unknown): EncodingPlan {
  if (typeof value === 'object' && value !== null) {
    const tag = binaryTag(value);
    if (tag !== 0) return { kind: 'binary', value: value as BinaryValue, tag };
  }
  const walker = new Walker();
  const template = walker.walk(value, 'value');
  if (walker.needsV8) return { kind: 'v8', value, typed: walker.typed };
  return { kind: 'msgpack', template, frames: walker.frames };
}

class Walker {
  readonly frames: BinaryValue[] = [];
  needsV8 = false;
  readonly typed = new Map<object, TypedParts>();
  private readonly seen = new Set<object>();

  walk(value: unknown, path: string): unknown {
    switch (typeof value) {
      case 'function':
        throw new CodecError(`cannot encode a function (at ${path})`);
      case 'symbol':
        throw new CodecError(`cannot encode a symbol (at ${path})`);
      case 'string':
        if (!value.isWellFormed()) this.needsV8 = true;
        return value;
      case 'number':
        if (Object.is(value, -0)) this.needsV8 = true;
        return value;
      case 'object':
        return value === null ? null : this.walkObject(value, path);
      default:
        return value;
    }
  }

  private walkObject(value: object, path: string): unknown {
    if (this.seen.has(value)) {
      // msgpackr would duplicate a shared object and loop forever on a cycle.
      this.needsV8 = true;
      return value;
    }
    this.seen.add(value);
    const tag = binaryTag(value);
    if (tag !== 0) {
      this.frames.push(value as BinaryValue);
      return new FrameRef(this.frames.length - 1, tag);
    }
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto === Array.prototype) return this.walkArray(value as unknown[], path);
    if (proto === Object.prototype || proto === null) return this.walkPlainObject(value as Record<string, unknown>, path);
    if (proto === Map.prototype) return this.walkMap(value as Map<unknown, unknown>, path);
    if (proto === Set.prototype) return this.walkSet(value as Set<unknown>, path);
    if (proto === Date.prototype) return value;
    if (
      value instanceof RegExp ||
      value instanceof Error ||
      value instanceof Number ||
      value instanceof String ||
      value instanceof Boolean
    ) {
      this.needsV8 = true;
      // The v8 serializer writes an Error's own `cause`: what it holds is walked like any value.
      const cause = value instanceof Error ? Object.getOwnPropertyDescriptor(value, 'cause') : undefined;
      if (cause !== undefined && 'value' in cause) this.walk(cause.value, `${path}.cause`);
      return value;
    }
    const type = typeOf(value);
    if (type !== undefined) return this.walkTyped(value, type, path);
    const name = (value as { constructor?: { name?: string } }).constructor?.name ?? 'unknown';
    throw new CodecError(
      `cannot encode an instance of ${name} (at ${path}): only plain data, Map, Set, Date, RegExp, Error, binary payloads and registered types (registerType) can be spilled`,
    );
  }

  private walkTyped(value: object, type: TypeEntry, path: string): TypedRef {
    const parts = typedParts(type, value, path);
    this.typed.set(value, parts);
    const first = this.frames.length;
    for (const view of parts.buffers) this.frames.push(view);
    return new TypedRef(type.name, parts.meta, first, parts.buffers.length);
  }

  private walkArray(array: unknown[], path: string): unknown[] {
    let out = array;
    for (let i = 0; i < array.length; i++) {
      if (!(i in array)) this.needsV8 = true;
      const item = array[i];
      const replaced = this.walk(item, `${path}[${i}]`);
      if (replaced !== item) {
        if (out === array) out = array.slice();
        out[i] = replaced;
      }
    }
    return out;
  }

  private walkPlainObject(object: Record<string, unknown>, path: string): Record<string, unknown> {
    if (Object.getOwnPropertySymbols(object).length > 0) {
      throw new CodecError(`cannot encode symbol-keyed properties (at ${path})`);
    }
    let out = object;
    for (const key of Object.keys(object)) {
      if (key === '__proto__' || !key.isWellFormed()) this.needsV8 = true;
      const item = object[key];
      const replaced = this.walk(item, `${path}.${key}`);
      if (replaced !== item) {
        if (out === object) out = { ...object };
        out[key] = replaced;
      }
    }
    return out;
  }

  private walkMap(map: Map<unknown, unknown>, path: string): Map<unknown, unknown> {
    let changed = false;
    const entries: [unknown, unknown][] = [];
    for (const [key, item] of map) {
      const newKey = this.walk(key, `${path}<key>`);
      const newItem = this.walk(item, `${path}.get(...)`);
      changed ||= newKey !== key || newItem !== item;
      entries.push([newKey, newItem]);
    }
    return changed ? new Map(entries) : map;
  }

  private walkSet(set: Set<unknown>, path: string): Set<unknown> {
    let changed = false;
    const items: unknown[] = [];
    for (const item of set) {
      const replaced = this.walk(item, `${path}<item>`);
      changed ||= replaced !== item;
      items.push(replaced);
    }
    return changed ? new Set(items) : set;
  }
}
