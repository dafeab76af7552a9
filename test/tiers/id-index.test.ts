/** IdIndex: pages for runs of ids, a Map for the rest, checked against a Map. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { IdIndex } from '../../src/tiers/disk/id-index.js';

describe('IdIndex', () => {
  it('keeps a run of increasing ids in pages, with nothing in the Map', () => {
    const index = new IdIndex();
    for (let id = 1; id <= 100_000; id++) index.set(id, id * 2);
    assert.deepEqual(index.shape, { pages: 98, sparse: 0 });
    assert.equal(index.size, 100_000);
    assert.equal(index.get(77_777), 155_554);
    assert.equal(index.get(0), -1);
    assert.equal(index.get(100_001), -1);
  });

  it('keeps ids that arrive one in every 10,000 in the Map, not in a page each', () => {
    const index = new IdIndex();
    for (let k = 0; k < 1000; k++) index.set(k * 10_000, k);
    const { pages, sparse } = index.shape;
    assert.ok(pages <= 1, `${pages} pages for 1,000 sparse ids`);
    assert.equal(pages + sparse, 1000);
    for (let k = 0; k < 1000; k++) assert.equal(index.get(k * 10_000), k);
  });

  it('a store that hands every other id to this tier still gets pages', () => {
    const index = new IdIndex();
    for (let id = 0; id < 20_000; id += 2) index.set(id, id);
    assert.equal(index.shape.sparse, 0);
  });

  it('lets a page go when its last id is deleted, and finds ids left in the Map after their page was made', () => {
    const index = new IdIndex();
    index.set(0, 0); // the first page
    index.set(5000, 1); // page 4 while page 0 is sparse: the Map
    for (let id = 1; id < 200; id++) index.set(id, 100 + id); // page 0 fills up
    index.set(5001, 2); // now page 4 is made; 5000 stays in the Map
    assert.deepEqual(index.shape, { pages: 2, sparse: 1 });
    assert.equal(index.get(5000), 1);
    assert.equal(index.get(5001), 2);
    assert.equal(index.delete(5001), 2);
    assert.deepEqual(index.shape, { pages: 1, sparse: 1 }, 'page 4 went with its last id');
    assert.equal(index.delete(5000), 1);
    assert.equal(index.delete(5000), -1);
    assert.equal(index.get(5000), -1);
    index.clear();
    assert.deepEqual([index.size, index.shape.pages, index.shape.sparse, index.get(3)], [0, 0, 0, -1]);
  });

  it('handles ids up to Number.MAX_SAFE_INTEGER', () => {
    const index = new IdIndex();
    const top = Number.MAX_SAFE_INTEGER;
    index.set(top, 7);
    index.set(top - 1, 8);
    assert.deepEqual([index.get(top), index.get(top - 1), index.get(top - 2)], [7, 8, -1]);
    assert.equal(index.delete(top), 7);
    assert.equal(index.get(top), -1);
  });

  it('matches a Map under any sequence of sets and deletes (model-based)', () => {
    const id = fc.oneof(fc.nat(3000), fc.integer({ min: 1_000_000, max: 1_004_000 }), fc.nat(2 ** 45));
    const op = fc.oneof(
      { weight: 3, arbitrary: fc.record({ kind: fc.constant('set' as const), id, slot: fc.nat(2 ** 31 - 2) }) },
      // Runs of consecutive ids, as a store hands them out.
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('run' as const), id, length: fc.integer({ min: 1, max: 600 }) }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), pick: fc.nat() }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('miss' as const), id }) },
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const index = new IdIndex();
        const model = new Map<number, number>();
        const add = (key: number, slot: number): void => {
          if (model.has(key)) return;
          index.set(key, slot);
          model.set(key, slot);
        };
        for (const o of ops) {
          if (o.kind === 'set') add(o.id, o.slot);
          else if (o.kind === 'run') for (let k = 0; k < o.length; k++) add(o.id + k, k);
          else if (o.kind === 'miss') assert.equal(index.get(o.id), model.get(o.id) ?? -1);
          else {
            const keys = [...model.keys()];
            if (keys.length === 0) continue;
            const key = keys[o.pick % keys.length];
            assert.equal(index.delete(key), model.get(key));
            model.delete(key);
          }
        }
        assert.equal(index.size, model.size);
        for (const [key, slot] of model) assert.equal(index.get(key), slot);
        const { pages, sparse } = index.shape;
        assert.ok(sparse <= model.size && pages <= model.size, 'no page or Map entry outlives its ids');
      }),
      { numRuns: 300 },
    );
  });
});
