/** The supervisor's kill threshold (--terminate): the footprint excused, never past the kernel's ceiling. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { MIN_ALLOWANCE_BYTES, terminateThreshold } from '../../src/client/terminate-rule.js';

const MiB = 2 ** 20;
const GiB = 2 ** 30;

test('a small worker on a big host: its footprint comes on top of terminate × twice its limit', () => {
  assert.equal(terminateThreshold({ footprint: 100 * MiB, limit: 128 * MiB, terminate: 0.95, ceiling: 16 * GiB, workers: 3 }), 100 * MiB + 0.95 * 256 * MiB);
});

test("a worker of a few MiB is allowed the runtime's least allowance, not twice its limit", () => {
  assert.equal(MIN_ALLOWANCE_BYTES, 256 * MiB);
  assert.equal(terminateThreshold({ footprint: 120 * MiB, limit: 8 * MiB, terminate: 0.95, ceiling: 16 * GiB, workers: 1 }), 120 * MiB + 0.95 * 256 * MiB);
  assert.equal(terminateThreshold({ footprint: 120 * MiB, limit: 64 * MiB, terminate: 0.95, ceiling: 16 * GiB, workers: 1 }), 120 * MiB + 0.95 * 256 * MiB);
  // From 128 MiB up, twice the limit is the larger.
  assert.equal(terminateThreshold({ footprint: 120 * MiB, limit: 256 * MiB, terminate: 0.95, ceiling: 16 * GiB, workers: 1 }), 120 * MiB + 0.95 * 512 * MiB);
});

test('--memory-limit auto (the limit is the host\'s share): terminate × the limit, footprint included', () => {
  assert.equal(terminateThreshold({ footprint: 100 * MiB, limit: 4 * GiB, terminate: 0.95, ceiling: 8 * GiB, workers: 2 }), 0.95 * 4 * GiB);
});

test('the threshold is never above terminate × the worker\'s share of the kernel\'s ceiling, nor below terminate × min(2 × limit, share)', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 64 * GiB }),
      fc.integer({ min: 1, max: 64 * GiB }),
      fc.double({ min: 0.01, max: 1, noNaN: true }),
      fc.integer({ min: 1, max: 256 * GiB }),
      fc.integer({ min: 1, max: 64 }),
      (footprint, limit, terminate, ceiling, workers) => {
        const threshold = terminateThreshold({ footprint, limit, terminate, ceiling, workers });
        const share = ceiling / workers;
        assert.ok(threshold <= terminate * share * (1 + 1e-12));
        assert.ok(threshold >= terminate * Math.min(2 * limit, share) * (1 - 1e-12));
        // A bigger footprint never lowers it.
        assert.ok(terminateThreshold({ footprint: footprint + MiB, limit, terminate, ceiling, workers }) >= threshold);
      },
    ),
  );
});
