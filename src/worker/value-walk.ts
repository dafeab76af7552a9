/**
 * Walks shared by the crossings between the loop and task threads (large-views.ts,
 * typed-crossing.ts): both rebuild, inside a value just received, the objects that crossed
 * in another form, through arrays, plain objects, Maps and Sets.
 */
import { define } from '../codec/v8-typed.js';

/** What a replacement callback returns for an object it leaves as it is (then walked into). */
export const KEEP: unique symbol = Symbol('keep');

/**
 * Replaces, in place (the value is the receiver's own copy), every object for which
 * `replacement` returns something other than KEEP; other objects are walked into once.
 */
export function replaceInPlace(value: unknown, replacement: (v: object) => unknown): unknown {
  const seen = new Set<object>();
  const swap = (v: unknown): unknown => {
    if (typeof v !== 'object' || v === null) return v;
    const out = replacement(v);
    if (out !== KEEP) return out;
    visit(v);
    return v;
  };
  const visit = (v: object): void => {
    if (seen.has(v) || ArrayBuffer.isView(v)) return;
    seen.add(v);
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        if (!(i in v)) continue;
        const item: unknown = v[i];
        const out = swap(item);
        if (out !== item) v[i] = out;
      }
    } else if (v instanceof Map) {
      const entries = [...(v as Map<unknown, unknown>)];
      v.clear();
      for (const [k, item] of entries) v.set(swap(k), swap(item));
    } else if (v instanceof Set) {
      const items = [...(v as Set<unknown>)];
      v.clear();
      for (const item of items) v.add(swap(item));
    } else if (isPlainObject(v)) {
      const record = v as Record<string, unknown>;
      for (const [k, item] of Object.entries(record)) {
        const out = swap(item);
        if (out !== item) define(record, k, out);
      }
    }
  };
  return swap(value);
}

export function isPlainObject(v: object): boolean {
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}
