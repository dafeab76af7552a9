/**
 * `spillway local --workers 1 --memory-limit 64MiB --partitions 1 --size 5GiB` ran for
 * 90 s (peak RSS 7.4 GiB) and failed verification: output 0 held 134217728 values, expected
 * 671088640 (5 GiB mod 4 GiB). A partition too large to be one value is bad input.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgumentError } from '../../src/errors.js';
import { planWorkload } from '../../src/workloads/index.js';

test('a partition larger than a value can be is rejected before the cluster starts', () => {
  for (const name of ['shuffle', 'map-reduce'] as const) {
    assert.throws(() => planWorkload(name, { bytes: 5 * 2 ** 30, partitions: 1 }), InvalidArgumentError);
    assert.doesNotThrow(() => planWorkload(name, { bytes: 2 ** 31, partitions: 1 }));
  }
});
