/** How compaction cuts a segment's live values into windows it reads at once. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { compactWindows } from '../../src/tiers/disk/segment.js';
import type { LiveValue } from '../../src/tiers/disk/segment.js';

/** Values laid out back to back in the order given (empty ones share the next one's offset). */
function layout(sizes: number[]): LiveValue[] {
  let offset = 0;
  return sizes.map((stored, id) => {
    const v = { id, offset, stored };
    offset += stored;
    return v;
  });
}

/** Every value's bytes lie inside its window. */
function assertCovered(live: LiveValue[], windowBytes: number): void {
  const windows = compactWindows(live, windowBytes);
  let next = 0;
  for (const w of windows) {
    assert.equal(w.from, next, 'windows follow each other');
    assert.ok(w.to > w.from);
    next = w.to;
    for (const v of live.slice(w.from, w.to)) {
      assert.ok(v.offset >= w.base && v.offset + v.stored <= w.base + w.span, `value ${v.id} [${v.offset}, +${v.stored}) outside window [${w.base}, +${w.span})`);
    }
    if (w.to - w.from > 1) assert.ok(w.span <= windowBytes, 'a window of several values fits the limit');
  }
  assert.equal(next, live.length, 'every value is in a window');
}

describe('compactWindows', () => {
  it('an empty value listed after a real one at the same offset does not cut the real one short', () => {
    // Appended empty then real (same offset), but the real one landed first (its group
    // write ended before the empty one's), so the segment lists it first.
    const live: LiveValue[] = [
      { id: 1, offset: 100, stored: 50 },
      { id: 0, offset: 100, stored: 0 },
      { id: 2, offset: 0, stored: 100 },
    ];
    const windows = compactWindows(live, 1 << 20);
    assert.deepEqual(windows, [{ from: 0, to: 3, base: 0, span: 150 }]);
    assert.deepEqual(
      live.map((v) => v.id),
      [2, 0, 1],
      'sorted by offset, empty first',
    );
  });

  it('cuts at the window size, and gives a value bigger than a window one of its own', () => {
    const live = layout([40, 40, 40, 200, 10, 0, 10]);
    const windows = compactWindows(live, 100);
    assert.deepEqual(
      windows.map((w) => [w.from, w.to, w.base, w.span]),
      [
        [0, 2, 0, 80],
        [2, 3, 80, 40],
        [3, 4, 120, 200],
        [4, 7, 320, 20],
      ],
    );
  });

  it('no values, no windows', () => {
    assert.deepEqual(compactWindows([], 100), []);
  });

  it('property: in any listed order, every value lies inside its window and windows stay within the limit', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 300 })), { maxLength: 60 }),
        fc.array(fc.nat(), { maxLength: 60 }),
        fc.integer({ min: 1, max: 500 }),
        (sizes, swaps, windowBytes) => {
          const live = layout(sizes);
          // Any listing order (landings come in any order), and some values already dead.
          for (const [k, s] of swaps.entries()) {
            if (live.length < 2) break;
            const a = k % live.length;
            const b = s % live.length;
            [live[a], live[b]] = [live[b], live[a]];
          }
          const kept = live.filter((_, k) => swaps[k] === undefined || swaps[k] % 5 !== 0);
          assertCovered(kept, windowBytes);
        },
      ),
      { numRuns: 500 },
    );
  });
});
