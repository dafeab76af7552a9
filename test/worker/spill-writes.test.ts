import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { InvalidArgumentError } from '../../src/errors.js';
import { DiskTier } from '../../src/tiers/disk/disk-tier.js';
import { Worker } from '../../src/worker/index.js';
import { resolveWorkerOptions } from '../../src/worker/options.js';
import { FakeScheduler } from './helpers.js';
import { cleanupScope } from '../helpers/cleanup.js';

const file = cleanupScope();
let scheduler: FakeScheduler;

before(async () => {
  scheduler = await FakeScheduler.start({ token: 't' });
});
after(async () => {
  await scheduler.close();
  await file.end();
});

/** A worker with `directWrites` as given: 64 values of 32 KiB spilled (fused into segment groups), then read back. */
async function spillThrough(directWrites: boolean | undefined): Promise<{ tier: DiskTier; flushes: number; direct: number }> {
  const worker = await Worker.start({ scheduler: scheduler.address, token: 't', memoryLimit: '64 MiB', nthreads: 1, monitorIntervalMs: false, directWrites });
  try {
    const tier = worker.store.tiers[0];
    assert.ok(tier instanceof DiskTier, 'the worker spills to a DiskTier');
    const values = Array.from({ length: 64 }, (_, i) => new Float64Array(4096).fill(i));
    values.forEach((v, i) => worker.store.set(`v${i}`, v));
    await worker.store.evict();
    assert.equal(worker.store.stats().disk.count, values.length, 'every value spilled');
    for (const [i, v] of values.entries()) assert.deepEqual(await worker.store.get(`v${i}`), v, `v${i} read back`);
    const { details } = tier.stats();
    assert.ok(details.flushes > 0, 'values fused into segment groups');
    return { tier, flushes: details.flushes, direct: details.directFlushes };
  } finally {
    await worker.close();
  }
}

test('a worker spills through the page cache by default: no group of its segments is written direct', async () => {
  const { flushes, direct } = await spillThrough(undefined);
  assert.equal(direct, 0, `${flushes} group writes, none direct`);
});

test('directWrites: true writes its groups past the page cache, where the filesystem allows', async () => {
  const { tier, flushes, direct } = await spillThrough(true);
  if (tier.directWritesOffReason !== undefined) {
    assert.equal(direct, 0, `refused: ${tier.directWritesOffReason}`);
  } else {
    assert.ok(direct > 0, `${flushes} group writes, ${direct} direct`);
  }
});

test('directWrites must be a boolean', () => {
  const base = { scheduler: { host: '127.0.0.1', port: 1 }, memoryLimit: '64 MiB' };
  assert.equal(resolveWorkerOptions(base).directWrites, false);
  assert.equal(resolveWorkerOptions({ ...base, directWrites: true }).directWrites, true);
  for (const bad of ['yes', 1, 'false']) {
    assert.throws(() => resolveWorkerOptions({ ...base, directWrites: bad as unknown as boolean }), InvalidArgumentError, String(bad));
  }
});
