import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Slicer } from '../../src/loop.js';

const spin = (ms: number): void => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

describe('Slicer', () => {
  it('is due once a stretch has run for its slice, and not after a turn', async () => {
    // A slice far longer than the process is ever descheduled between two lines: with 5 ms,
    // a loaded CI machine once made the slicer due before the first check.
    const slicer = new Slicer(200);
    assert.equal(slicer.due(), false);
    spin(210);
    assert.equal(slicer.due(), true);
    await slicer.turn();
    assert.equal(slicer.due(), false);
    assert.ok(slicer.busySeconds() >= 0.2, 'the stretch before the turn counts as busy');
  });

  it('with checkEvery, reads the clock on every n-th call only', () => {
    const slicer = new Slicer(1, 4);
    spin(2);
    // Past the slice, but only the 4th call looks at the clock.
    assert.deepEqual([slicer.due(), slicer.due(), slicer.due(), slicer.due()], [false, false, false, true]);
    assert.deepEqual([slicer.due(), slicer.due(), slicer.due(), slicer.due()], [false, false, false, true]);
  });
});
