/**
 * Values of registered types (Apache Arrow tables, user classes) between the worker's event
 * loop and its task threads. A structured clone keeps only plain data, so such a value
 * crosses as its encoded parts: a plain object branded with a per-process secret (user data
 * cannot pass for one), holding the type's name, meta and buffers. The buffers are moved,
 * not copied, where they are large enough to own (the thread's side), or copied once into
 * one fresh buffer laid out as the value format lays frames out, so that decoding in the
 * thread reads them in place (the loop's side: copy-inputs.ts).
 *
 * A thread decodes what it is given with the types its task module registered; the loop
 * keeps what a thread returns as an EncodedTypedValue: it stores, spills and sends values,
 * and never runs a type's code.
 */
import { randomUUID } from 'node:crypto';
import { EncodedTypedValue, decodeTyped, typeOf, typedParts } from '../codec/types.js';
import { define } from '../codec/v8-typed.js';
import { CodecError } from '../errors.js';
import { KEEP, isPlainObject, replaceInPlace } from './value-walk.js';

/** The property naming a crossing value; its value is the process's brand. */
const BRAND_KEY = '\u0000spillway.typed';

/** A value of a registered type as it crosses between threads. */
export interface CrossingValue {
  [BRAND_KEY]: string;
  name: string;
  meta: unknown;
  buffers: Uint8Array[];
}

/** A secret made once per thread; the loop's is handed to its task threads (workerData). */
export const LOOP_BRAND: string = randomUUID();

/** The encoded parts of a value of a registered type, or undefined for any other value. */
export function partsOf(value: object, path = 'value'): { name: string; meta: unknown; buffers: Uint8Array[] } | undefined {
  const type = typeOf(value);
  return type === undefined ? undefined : typedParts(type, value, path);
}

export function crossing(brand: string, parts: { name: string; meta: unknown; buffers: Uint8Array[] }): CrossingValue {
  return { [BRAND_KEY]: brand, name: parts.name, meta: parts.meta, buffers: parts.buffers };
}

/**
 * `value` with every value of a registered type replaced by its CrossingValue (the buffers
 * views of the value's own memory); `value` itself, and `count` 0, when it holds none.
 * Arrays, plain objects, Maps and Sets on the way are copied only when something in them
 * is replaced; shared and cyclic references stay so.
 */
export function liftTypedValues(value: unknown, brand: string): { value: unknown; count: number } {
  let count = 0;
  const seen = new Map<object, unknown>();
  const visit = (v: unknown, path: string): unknown => {
    if (typeof v !== 'object' || v === null || ArrayBuffer.isView(v) || v instanceof ArrayBuffer) return v;
    if (seen.has(v)) return seen.get(v);
    seen.set(v, v); // a cycle through a container keeps the original until the copy exists
    let out: unknown = v;
    if (Array.isArray(v)) {
      const items = v.map((item, i) => visit(item, `${path}[${i}]`));
      if (items.some((item, i) => item !== v[i])) out = items;
    } else if (v instanceof Map) {
      const entries = [...v].map(([k, item]) => [visit(k, `${path}<key>`), visit(item, `${path}.get(...)`)] as const);
      if (entries.some(([k, item]) => !v.has(k) || v.get(k) !== item)) out = new Map(entries);
    } else if (v instanceof Set) {
      const items = [...v].map((item) => visit(item, `${path}<item>`));
      if (items.some((item) => !v.has(item))) out = new Set(items);
    } else if (isPlainObject(v)) {
      let copy: Record<string, unknown> | undefined;
      for (const [k, item] of Object.entries(v)) {
        const replaced = visit(item, `${path}.${k}`);
        if (replaced !== item) copy ??= { ...(v as Record<string, unknown>) };
        if (copy !== undefined) define(copy, k, replaced);
      }
      if (copy !== undefined) out = copy;
    } else {
      const parts = partsOf(v, path);
      if (parts !== undefined) {
        count++;
        out = crossing(brand, parts);
      }
    }
    seen.set(v, out);
    return out;
  };
  const out = visit(value, 'value');
  return count === 0 ? { value, count } : { value: out, count };
}

/**
 * Puts back, in a value just received (changed in place: it is the receiver's own copy),
 * the values that crossed as CrossingValues: decoded (a task thread), or kept encoded
 * as EncodedTypedValues (the loop).
 */
export function restoreTypedValues(value: unknown, brand: string, how: 'decode' | 'keep-encoded'): unknown {
  return replaceInPlace(value, (v) => {
    if (!isCrossing(v, brand)) return KEEP;
    const buffers = v.buffers;
    if (!Array.isArray(buffers) || !buffers.every((b) => b instanceof Uint8Array) || typeof v.name !== 'string') {
      throw new CodecError('a value of a registered type arrived malformed from another thread');
    }
    return how === 'decode' ? decodeTyped(v.name, { meta: v.meta, buffers }) : new EncodedTypedValue(v.name, v.meta, buffers);
  });
}

function isCrossing(v: object, brand: string): v is CrossingValue {
  return (v as Partial<CrossingValue>)[BRAND_KEY] === brand;
}
