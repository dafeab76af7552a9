import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { LruList } from '../../src/store/lru.js';

type Op =
  | { readonly op: 'push' }
  | { readonly op: 'unshift' }
  | { readonly op: 'touch'; readonly pick: number }
  | { readonly op: 'remove'; readonly pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ op: 'push' as const }) },
  { weight: 2, arbitrary: fc.constant({ op: 'unshift' as const }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('touch' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('remove' as const), pick: fc.nat() }) },
);

interface Linked {
  readonly item: string;
  readonly slot: number;
}

/**
 * Runs `ops` against an LruList and against a plain array (least recently used first),
 * checking after every step that both agree, that live slots are distinct, and that slot
 * numbers stay below the largest number of items ever linked at once (freed slots are reused).
 */
function runModel(initialCapacity: number, ops: readonly Op[]): void {
  const list = new LruList<string>(initialCapacity);
  const model: Linked[] = [];
  let nextItem = 0;
  let peak = 0;
  for (const step of ops) {
    if (step.op === 'push' || step.op === 'unshift') {
      const item = `item${nextItem++}`;
      const slot = step.op === 'push' ? list.push(item) : list.unshift(item);
      if (step.op === 'push') model.push({ item, slot });
      else model.unshift({ item, slot });
      peak = Math.max(peak, model.length);
      assert.ok(Number.isInteger(slot) && slot >= 0 && slot < peak, `slot ${slot} with peak ${peak}`);
    } else if (model.length > 0) {
      const index = step.pick % model.length;
      const [entry] = model.splice(index, 1);
      if (step.op === 'touch') {
        list.touch(entry.slot);
        model.push(entry);
      } else {
        list.remove(entry.slot);
      }
    }
    assert.equal(list.size, model.length);
    assert.equal(list.oldest(), model[0]?.item);
    assert.deepEqual([...list.fromOldest()], model.map((e) => e.item));
    assert.equal(new Set(model.map((e) => e.slot)).size, model.length, 'live slots are distinct');
  }
}

describe('LruList', () => {
  it('model-based: push / unshift / touch / remove / oldest / fromOldest against an array', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 8 }), fc.array(opArb, { maxLength: 120 }), (capacity, ops) =>
        runModel(capacity, ops),
      ),
      { numRuns: 300 },
    );
  });

  it('grows far beyond the initial capacity and keeps order', () => {
    const list = new LruList<number>(2);
    const slots: number[] = [];
    for (let i = 0; i < 5000; i++) slots.push(list.push(i));
    assert.equal(list.size, 5000);
    assert.deepEqual(slots, Array.from({ length: 5000 }, (_, i) => i));
    // Touch the even ones: odds, then evens, in order.
    for (let i = 0; i < 5000; i += 2) list.touch(slots[i]);
    const order = [...list.fromOldest()];
    assert.deepEqual(order.slice(0, 2500), Array.from({ length: 2500 }, (_, i) => 2 * i + 1));
    assert.deepEqual(order.slice(2500), Array.from({ length: 2500 }, (_, i) => 2 * i));
    assert.equal(list.oldest(), 1);
  });

  it('an initial capacity of 0 or 1 still works', () => {
    for (const capacity of [0, 1]) {
      const list = new LruList<string>(capacity);
      const a = list.push('a');
      const b = list.push('b');
      const c = list.push('c');
      list.touch(a);
      assert.deepEqual([...list.fromOldest()], ['b', 'c', 'a']);
      list.remove(c);
      assert.deepEqual([...list.fromOldest()], ['b', 'a']);
      assert.equal(list.oldest(), 'b');
      assert.equal(b !== a && b !== c, true);
    }
  });

  it('reuses freed slots instead of growing', () => {
    const list = new LruList<number>(4);
    const slots = [0, 1, 2, 3].map((i) => list.push(i));
    list.remove(slots[1]);
    list.remove(slots[3]);
    const reused = [list.push(10), list.push(11)];
    assert.deepEqual(reused.sort(), [slots[1], slots[3]].sort());
    assert.deepEqual([...list.fromOldest()], [0, 2, 10, 11]);
    // Churn: many more pushes than live items never hands out a slot past the peak.
    for (let i = 0; i < 10_000; i++) {
      const slot = list.push(i);
      assert.ok(slot < 5);
      list.remove(slot);
    }
    assert.equal(list.size, 4);
  });

  it('touching the most recent item, or the only one, changes nothing', () => {
    const list = new LruList<string>();
    const only = list.push('only');
    list.touch(only);
    assert.deepEqual([...list.fromOldest()], ['only']);
    const second = list.push('second');
    list.touch(second);
    assert.deepEqual([...list.fromOldest()], ['only', 'second']);
    list.touch(only);
    assert.deepEqual([...list.fromOldest()], ['second', 'only']);
  });

  it('empties completely and fills again', () => {
    const list = new LruList<string>(2);
    const slots = ['a', 'b', 'c'].map((x) => list.push(x));
    for (const slot of slots) list.remove(slot);
    assert.equal(list.size, 0);
    assert.equal(list.oldest(), undefined);
    assert.deepEqual([...list.fromOldest()], []);
    list.push('d');
    assert.deepEqual([...list.fromOldest()], ['d']);
    assert.equal(list.oldest(), 'd');
  });
});
