import { binaryTag } from './binary.js';
import { typeOf } from './types.js';

/** Arrays, Maps and Sets longer than this are sampled, not walked item by item. */
const SAMPLE_THRESHOLD = 256;
const SAMPLES = 64;

// Rough V8 object costs on 64-bit builds (pointer compression off in Node).
const OBJECT_OVERHEAD = 32;
const SLOT = 8;
const STRING_OVERHEAD = 16;
/**
 * Objects nested deeper than this are sized from a work list, not by recursion: a linked
 * list or a tree a few thousand levels deep overflowed the stack, and `set()` threw a
 * RangeError. The total is the same either way.
 */
const MAX_DEPTH = 256;

/**
 * Estimates the bytes a value holds in memory. Binary payloads are counted exactly (their
 * byteLength); strings, objects and containers are estimated; long containers are sampled
 * so `set()` stays cheap. Pass `{ size }` to `store.set` when you know better.
 */
export function sizeof(value: unknown): number {
  // The common case of a binary payload needs no walker (and no Set for cycles).
  if (typeof value === 'object' && value !== null && binaryTag(value) !== 0) {
    return OBJECT_OVERHEAD + (value as ArrayBufferView | ArrayBuffer).byteLength;
  }
  return new SizeWalker().total(value);
}

class SizeWalker {
  private readonly seen = new Set<object>();
  private depth = 0;
  /** Objects met deeper than MAX_DEPTH, sized after the walk that met them. */
  private readonly deferred: object[] = [];

  total(value: unknown): number {
    let total = this.size(value);
    for (let next = this.deferred.pop(); next !== undefined; next = this.deferred.pop()) total += this.walkObject(next);
    return total;
  }

  size(value: unknown): number {
    switch (typeof value) {
      case 'string':
        return STRING_OVERHEAD + value.length;
      case 'number':
      case 'boolean':
      case 'undefined':
        return SLOT;
      case 'bigint':
        return STRING_OVERHEAD + Math.ceil(value.toString(16).length / 2);
      case 'object':
        return value === null ? SLOT : this.objectSize(value);
      default:
        return SLOT;
    }
  }

  /**
   * The bytes an item adds beyond the slot that holds it. Numbers, booleans, null and
   * undefined live in the slot itself (Smis, unboxed doubles in double arrays, oddballs),
   * so they add nothing; counting SLOT for them again would estimate an array of numbers
   * at twice its size.
   */
  private item(value: unknown): number {
    if (value === null) return 0;
    switch (typeof value) {
      case 'number':
      case 'boolean':
      case 'undefined':
        return 0;
      default:
        return this.size(value);
    }
  }

  private objectSize(value: object): number {
    if (this.seen.has(value)) return SLOT; // shared or cyclic: counted once
    if (this.depth >= MAX_DEPTH) {
      this.deferred.push(value);
      return 0;
    }
    this.depth++;
    try {
      return this.walkObject(value);
    } finally {
      this.depth--;
    }
  }

  private walkObject(value: object): number {
    if (this.seen.has(value)) return SLOT;
    this.seen.add(value);
    if (binaryTag(value) !== 0) {
      return OBJECT_OVERHEAD + (value as ArrayBufferView | ArrayBuffer).byteLength;
    }
    if (Array.isArray(value)) return OBJECT_OVERHEAD + this.sampled(value, value.length);
    if (value instanceof Map) {
      return OBJECT_OVERHEAD + this.sampled([...sampleIterable(value.entries(), value.size)], value.size);
    }
    if (value instanceof Set) {
      return OBJECT_OVERHEAD + this.sampled([...sampleIterable(value.values(), value.size)], value.size);
    }
    if (value instanceof Date) return OBJECT_OVERHEAD;
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      const type = typeOf(value);
      if (type !== undefined) return OBJECT_OVERHEAD + type.sizeof(value);
    }
    const keys = Object.keys(value);
    let total = OBJECT_OVERHEAD;
    const record = value as Record<string, unknown>;
    if (keys.length <= SAMPLE_THRESHOLD) {
      for (const key of keys) total += SLOT + this.size(key) + this.item(record[key]);
      return total;
    }
    let sample = 0;
    const step = keys.length / SAMPLES;
    for (let i = 0; i < SAMPLES; i++) {
      const key = keys[Math.floor(i * step)];
      sample += SLOT + this.size(key) + this.item(record[key]);
    }
    return total + Math.round((sample / SAMPLES) * keys.length);
  }

  /** Items are walked in full up to the threshold; beyond it, evenly spaced samples. */
  private sampled(items: readonly unknown[], count: number): number {
    if (count <= SAMPLE_THRESHOLD) {
      let total = SLOT * count;
      for (const item of items) total += this.item(item);
      return total;
    }
    const picks = items.length === count ? evenlySpaced(items, SAMPLES) : items;
    let sample = 0;
    for (const item of picks) sample += this.item(item);
    return SLOT * count + Math.round((sample / picks.length) * count);
  }
}

function evenlySpaced<T>(items: readonly T[], n: number): T[] {
  const step = items.length / n;
  const out: T[] = [];
  for (let i = 0; i < n; i++) out.push(items[Math.floor(i * step)]);
  return out;
}

/** First items of a Map or Set (iteration order is the only cheap access). */
function* sampleIterable<T>(iterator: Iterator<T>, size: number): Generator<T> {
  const limit = size <= SAMPLE_THRESHOLD ? size : SAMPLES;
  for (let i = 0; i < limit; i++) {
    const next = iterator.next();
    if (next.done === true) return;
    yield next.value;
  }
}
