/** Placements: the DiskTier's typed-array index of fused values, checked against a Map. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { NO_SEGMENT, Placements, SlotState } from '../../src/tiers/disk/placements.js';

interface Place {
  segment: number;
  offset: number;
  stored: number;
  live: boolean;
}

type Op =
  | { kind: 'add'; id: number; stored: number }
  | { kind: 'place'; pick: number; segment: number; offset: number }
  | { kind: 'live'; pick: number }
  | { kind: 'unplace'; pick: number }
  | { kind: 'delete'; pick: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  // Far-flung ids (the id index's Map) and ids close together (its pages).
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('add' as const), id: fc.oneof(fc.nat(2 ** 40), fc.nat(5000)), stored: fc.nat(2 ** 33) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('place' as const), pick: fc.nat(), segment: fc.nat(1000), offset: fc.nat(2 ** 36) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('live' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('unplace' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('delete' as const), pick: fc.nat() }) },
);

describe('Placements', () => {
  it('a new id is writing, has no segment, and keeps its stored length', () => {
    const p = new Placements();
    const slot = p.add(7, 4096);
    assert.equal(p.slotOf(7), slot);
    assert.equal(p.state(slot), SlotState.Writing);
    assert.equal(p.segment(slot), NO_SEGMENT);
    assert.equal(p.stored(slot), 4096);
    p.place(slot, 3, 1 << 20);
    p.setLive(slot);
    assert.deepEqual([p.segment(slot), p.offset(slot), p.state(slot)], [3, 1 << 20, SlotState.Live]);
    assert.equal(p.slotOf(8), -1);
    assert.equal(p.has(8), false);
  });

  it('reuses freed slots before growing, across page boundaries', () => {
    const p = new Placements();
    const n = 40_000; // more than two pages of slots
    for (let id = 0; id < n; id++) p.add(id, id);
    for (let id = 0; id < n; id += 2) p.delete(id);
    const freed = new Set(Array.from({ length: n / 2 }, (_, k) => 2 * k));
    // Every freed slot comes back before any new one.
    for (let id = n; id < n + n / 2; id++) assert.ok(freed.delete(p.add(id, 1)), `slot for ${id} was not a freed one`);
    assert.equal(freed.size, 0);
    assert.equal(p.add(10 ** 9, 1), n, 'then the columns grow');
    assert.equal(p.size, n + 1);
  });

  it('lets its pages go once the last id is deleted', () => {
    const p = new Placements();
    for (let id = 0; id < 20_000; id++) p.add(id, 1);
    for (let id = 0; id < 20_000; id++) p.delete(id);
    assert.equal(p.size, 0);
    assert.equal(p.add(5, 9), 0, 'numbering starts again from slot 0');
  });

  it('matches a Map under any sequence of operations (model-based)', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const p = new Placements();
        const model = new Map<number, Place>();
        const pick = (n: number): number | undefined => {
          const ids = [...model.keys()];
          return ids.length === 0 ? undefined : ids[n % ids.length];
        };
        for (const o of ops) {
          if (o.kind === 'add') {
            if (model.has(o.id)) continue;
            p.add(o.id, o.stored);
            model.set(o.id, { segment: NO_SEGMENT, offset: 0, stored: o.stored, live: false });
            continue;
          }
          const id = pick(o.pick);
          if (id === undefined) continue;
          const m = model.get(id) as Place;
          const slot = p.slotOf(id);
          if (o.kind === 'place') {
            p.place(slot, o.segment, o.offset);
            Object.assign(m, { segment: o.segment, offset: o.offset });
          } else if (o.kind === 'live') {
            p.setLive(slot);
            m.live = true;
          } else if (o.kind === 'unplace') {
            p.unplace(slot);
            m.segment = NO_SEGMENT;
          } else {
            p.delete(id);
            model.delete(id);
          }
        }
        assert.equal(p.size, model.size);
        const slots = new Set<number>();
        for (const [id, m] of model) {
          const slot = p.slotOf(id);
          assert.ok(slot >= 0 && !slots.has(slot), `id ${id} has a slot of its own`);
          slots.add(slot);
          assert.equal(p.segment(slot), m.segment);
          if (m.segment !== NO_SEGMENT) assert.equal(p.offset(slot), m.offset);
          assert.equal(p.stored(slot), m.stored);
          assert.equal(p.state(slot), m.live ? SlotState.Live : SlotState.Writing);
        }
      }),
      { numRuns: 200 },
    );
  });
});
