import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { sizeof } from '../../src/codec/index.js';
import { binaryArb, bytesOf } from './arbitraries.js';

/** The most sizeof may add to a binary payload's byteLength. */
const BINARY_OVERHEAD_MAX = 64;

describe('sizeof', () => {
  it('binary payloads: exactly their byteLength plus a small constant', () => {
    const overheads = new Set<number>();
    fc.assert(
      fc.property(binaryArb(undefined, 1000), (value) => {
        const overhead = sizeof(value) - bytesOf(value).byteLength;
        assert.ok(overhead >= 0 && overhead <= BINARY_OVERHEAD_MAX, `overhead ${overhead}`);
        overheads.add(overhead);
      }),
      { numRuns: 200 },
    );
    assert.equal(overheads.size, 1, 'the same constant for every kind and length');
  });

  it('a view counts its own bytes, not the whole buffer under it', () => {
    const big = new ArrayBuffer(1 << 20);
    const small = new Float64Array(big, 1024, 4);
    assert.ok(sizeof(small) < 32 + BINARY_OVERHEAD_MAX);
    assert.equal(sizeof(new Uint8Array(big)) - sizeof(new Uint8Array(0)), 1 << 20);
    assert.equal(sizeof(Buffer.alloc(12345)) - sizeof(Buffer.alloc(0)), 12345);
  });

  it('strings grow with their length', () => {
    let previous = sizeof('');
    for (const length of [1, 10, 100, 1000, 100_000]) {
      const size = sizeof('x'.repeat(length));
      assert.ok(size > previous, `${length}`);
      assert.ok(size >= length);
      previous = size;
    }
  });

  it('primitives are small and positive', () => {
    for (const value of [0, -0, NaN, true, null, undefined, 10n ** 30n, Symbol('s')]) {
      const size = sizeof(value);
      assert.ok(size > 0 && size <= 64, `${String(value)}: ${size}`);
    }
    assert.ok(sizeof(2n ** 4000n) > sizeof(1n), 'bigints grow with their magnitude');
  });

  it('nested objects add up', () => {
    const payload = new Float64Array(1000);
    const inner = { data: payload, label: 'x'.repeat(500) };
    const outer = { a: inner, b: [Buffer.alloc(2000)] };
    assert.ok(sizeof(inner) >= payload.byteLength + 500);
    assert.ok(sizeof(outer) >= sizeof(inner) + 2000);
    assert.ok(sizeof(outer) <= payload.byteLength + 500 + 2000 + 1024, 'overheads stay small');
    // Containers of the same parts cost about the same.
    assert.ok(Math.abs(sizeof([inner]) - sizeof({ k: inner })) < 64);
    assert.ok(sizeof(new Map([['k', payload]])) >= payload.byteLength);
    assert.ok(sizeof(new Set([payload])) >= payload.byteLength);
  });

  it('property: a container is at least the sum of its binary payloads', () => {
    fc.assert(
      fc.property(fc.array(binaryArb(undefined, 200), { maxLength: 20 }), (items) => {
        const payload = items.reduce((n, item) => n + bytesOf(item).byteLength, 0);
        assert.ok(sizeof(items) >= payload);
        assert.ok(sizeof({ items }) >= payload);
        assert.ok(sizeof(items) <= payload + 64 * (items.length + 2));
      }),
      { numRuns: 100 },
    );
  });

  it('a shared object is counted once', () => {
    const payload = new Uint8Array(100_000);
    const once = sizeof([payload]);
    const twice = sizeof([payload, payload]);
    assert.ok(twice - once < 64);
  });

  it('cycles do not hang', () => {
    const a: Record<string, unknown> = { buf: new Uint8Array(1000) };
    a.self = a;
    const list: unknown[] = [a];
    list.push(list);
    const map = new Map<string, unknown>([['m', a]]);
    map.set('again', map);
    const size = sizeof({ a, list, map });
    assert.ok(size >= 1000 && size < 1000 + 2048);
  });

  it('a 10^6-element array of numbers: ~8 bytes per element, from a sample of its elements', () => {
    const array = Array.from({ length: 1_000_000 }, (_, i) => i * 0.5);
    // Counted, not timed: a Proxy of an array is an array to sizeof, and every element read goes through it.
    let reads = 0;
    const counted = new Proxy(array, {
      get(target, property, receiver) {
        if (typeof property === 'string' && /^\d+$/.test(property)) reads++;
        return Reflect.get(target, property, receiver) as unknown;
      },
    });
    const size = sizeof(counted);
    const expected = 8 * array.length;
    assert.ok(Math.abs(size - expected) <= 0.2 * expected, `estimated ${size}, expected about ${expected}`);
    assert.ok(reads > 0 && reads <= 64, `read ${reads} elements of ${array.length}`);
  });

  it('long arrays of strings and objects are sampled, scaling with the length', () => {
    const strings = Array.from({ length: 100_000 }, (_, i) => `item-${i % 10}-${'y'.repeat(90)}`);
    const size = sizeof(strings);
    // About 100 characters per item, plus a slot and string overhead.
    assert.ok(size >= 100 * strings.length && size <= 200 * strings.length, `${size}`);
    const objects = Array.from({ length: 10_000 }, () => ({ v: new Uint8Array(64) }));
    const objectsSize = sizeof(objects);
    assert.ok(objectsSize >= 64 * objects.length && objectsSize <= 300 * objects.length, `${objectsSize}`);
  });

  it('objects with many keys and big Maps/Sets are sampled too', () => {
    const record: Record<string, number> = {};
    for (let i = 0; i < 100_000; i++) record[`k${i}`] = i;
    // Counted, not timed: property reads through a Proxy, entries through the iterators.
    let reads = 0;
    const countedRecord = new Proxy(record, {
      get(target, property, receiver) {
        if (Object.hasOwn(target, property)) reads++;
        return Reflect.get(target, property, receiver) as unknown;
      },
    });
    const counting = <T>(iterator: IterableIterator<T>): IterableIterator<T> => ({
      next: () => {
        reads++;
        return iterator.next();
      },
      [Symbol.iterator]() {
        return this;
      },
    });
    class CountedMap<K, V> extends Map<K, V> {
      override entries(): MapIterator<[K, V]> {
        return counting(super.entries()) as MapIterator<[K, V]>;
      }
    }
    class CountedSet<T> extends Set<T> {
      override values(): SetIterator<T> {
        return counting(super.values()) as SetIterator<T>;
      }
    }
    const map = new CountedMap(Object.entries(record));
    const set = new CountedSet(Object.keys(record));
    for (const value of [countedRecord, map, set]) {
      reads = 0;
      const size = sizeof(value);
      assert.ok(size >= 8 * 100_000 && size <= 200 * 100_000, `${size}`);
      assert.ok(reads > 0 && reads <= 64, `read ${reads} of 100,000 items`);
    }
  });
});
