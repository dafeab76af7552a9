/** A segment's landed prefix: the bytes a read-ahead window may cover. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Segment } from '../../src/tiers/disk/segment.js';

function segment(): Segment {
  return new Segment(0, 0, 'segment-0.spws', new Promise(() => undefined));
}

describe('Segment.landed', () => {
  it('grows over groups that end in order', () => {
    const seg = segment();
    seg.landed(0, 100);
    assert.equal(seg.landedEnd, 100);
    seg.landed(100, 250);
    assert.equal(seg.landedEnd, 250);
  });

  it('waits for an earlier group, then takes in the ones that ended ahead of it', () => {
    const seg = segment();
    seg.landed(100, 250);
    seg.landed(250, 300);
    assert.equal(seg.landedEnd, 0, 'bytes before 100 are still being written');
    seg.landed(0, 100);
    assert.equal(seg.landedEnd, 300);
    assert.equal(seg.landedAhead.size, 0);
  });

  it('an empty group that shares its start with a real one does not stop the prefix', () => {
    // Two groups in flight: [100, 100) (only empty values) and [100, 180); the real one
    // ends first, ahead of [0, 100).
    const seg = segment();
    seg.landed(100, 180);
    seg.landed(100, 100);
    seg.landed(0, 100);
    assert.equal(seg.landedEnd, 180);
    assert.equal(seg.landedAhead.size, 0, 'nothing left behind');
  });

  it('is the longest prefix covered by ended groups, whatever order they end in (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.nat(64), { minLength: 1, maxLength: 30 }).chain((lengths) => fc.tuple(fc.constant(lengths), fc.shuffledSubarray([...lengths.keys()], { minLength: lengths.length }))),
        ([lengths, order]) => {
          const starts: number[] = [];
          let at = 0;
          for (const n of lengths) {
            starts.push(at);
            at += n;
          }
          const seg = segment();
          const ended = new Set<number>();
          for (const g of order) {
            seg.landed(starts[g], starts[g] + lengths[g]);
            ended.add(g);
            // Expected: the end of the longest run of ended groups from the start (empty groups never hold it back).
            let prefix = 0;
            for (let k = 0; k < lengths.length && (ended.has(k) || lengths[k] === 0); k++) prefix = starts[k] + lengths[k];
            assert.equal(seg.landedEnd, prefix);
          }
          assert.equal(seg.landedAhead.size, 0);
        },
      ),
    );
  });
});
