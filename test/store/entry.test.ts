/** Entry: its flags share one field and its rare fields live apart; each reads back as set. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Bucket, Entry, bucketOf } from '../../src/store/entry.js';

describe('Entry', () => {
  it('starts resident, not removed, with the rare fields at their defaults', () => {
    const entry = new Entry('k', 'v', 8);
    assert.deepEqual(
      [entry.resident, entry.removed, entry.weak, entry.unspillable, entry.retryAfter, entry.detached],
      [true, false, undefined, false, 0, false],
    );
    assert.equal(bucketOf(entry), Bucket.Memory);
  });

  it('setting a rare field to its default makes nothing (and reads the same)', () => {
    const entry = new Entry('k', 'v', 8);
    entry.weak = undefined;
    entry.unspillable = false;
    entry.retryAfter = 0;
    assert.equal(Object.getOwnPropertyDescriptor(entry, 'rare')?.value, undefined);
  });

  it('any sequence of writes to the flags and rare fields reads back like plain fields (model-based)', () => {
    const target = { alive: true };
    const write = fc.oneof(
      fc.record({ field: fc.constant('resident' as const), value: fc.boolean() }),
      fc.record({ field: fc.constant('removed' as const), value: fc.boolean() }),
      fc.record({ field: fc.constant('unspillable' as const), value: fc.boolean() }),
      fc.record({ field: fc.constant('retryAfter' as const), value: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 1e12, noNaN: true })) }),
      fc.record({ field: fc.constant('weak' as const), value: fc.boolean() }),
    );
    fc.assert(
      fc.property(fc.array(write, { maxLength: 40 }), (writes) => {
        const entry = new Entry('k', target, 8);
        const ref = new WeakRef(target);
        const model = { resident: true, removed: false, unspillable: false, retryAfter: 0, weak: undefined as WeakRef<object> | undefined };
        for (const w of writes) {
          if (w.field === 'weak') {
            const value = w.value ? ref : undefined;
            entry.weak = value;
            model.weak = value;
          } else if (w.field === 'retryAfter') {
            entry.retryAfter = w.value;
            model.retryAfter = w.value;
          } else {
            entry[w.field] = w.value;
            model[w.field] = w.value;
          }
        }
        assert.deepEqual(
          { resident: entry.resident, removed: entry.removed, unspillable: entry.unspillable, retryAfter: entry.retryAfter, weak: entry.weak },
          model,
        );
        assert.equal(entry.detached, model.weak !== undefined);
      }),
      { numRuns: 300 },
    );
  });
});
