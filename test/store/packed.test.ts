/** Small values spilled as packed batches (DiskTier's fast path, `src/tiers/packed.ts`). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TierWriteError, type DiskTier, type WriteResults } from '../../src/index.js';
import { checkInvariants } from '../../src/store/spill-store.js';
import { packedWritesOf, writePacked, type PackedBatch } from '../../src/tiers/packed.js';
import { KiB, MiB, assertSpillsOnRetry, f64, openStore } from '../helpers/store.js';

interface Spy {
  packed: number;
  writeMany: number;
}

/** Counts the tier's packed and writeMany calls; `intercept` may replace a packed call. */
function spy(disk: DiskTier, intercept?: (batch: PackedBatch, real: (b: PackedBatch) => Promise<WriteResults>) => Promise<WriteResults>): { disk: DiskTier; calls: Spy } {
  const calls: Spy = { packed: 0, writeMany: 0 };
  const packed = packedWritesOf(disk);
  assert.ok(packed !== undefined && disk.writeMany !== undefined);
  const real = (b: PackedBatch): Promise<WriteResults> => packed.write(b);
  Object.defineProperty(disk, writePacked, {
    value: { ...packed, write: (b: PackedBatch) => (calls.packed++, intercept ? intercept(b, real) : real(b)) },
  });
  const writeMany = disk.writeMany;
  Object.defineProperty(disk, 'writeMany', { value: (items: Parameters<typeof writeMany>[0]) => (calls.writeMany++, writeMany(items)) });
  return { disk, calls };
}

test('a plain DiskTier takes small values as packed batches: few calls, every value readable, invariants kept', async (t) => {
  let calls: Spy | undefined;
  const { store, disk } = await openStore(t, { memoryLimit: 256 * KiB, wrap: (d) => ({ calls } = spy(d)).disk });
  for (let i = 0; i < 600; i++) {
    store.set(`k${i}`, i % 5 === 0 ? { label: `v${i}`, data: f64(KiB, i) } : f64(KiB, i));
    if (store.paused) await store.whenResumed();
  }
  await store.evict();
  await store.flush();
  assert.ok(calls !== undefined && calls.packed > 0 && calls.packed <= 60, `${calls?.packed} packed batches for 600 values`);
  assert.equal(calls.writeMany, 0);
  assert.equal(store.stats().counters.diskWrites, 600);
  assert.equal(disk.stats().writes, 600);
  assert.deepEqual(store[checkInvariants](), []);
  for (let i = 0; i < 600; i++) assert.deepEqual(await store.get(`k${i}`), i % 5 === 0 ? { label: `v${i}`, data: f64(KiB, i) } : f64(KiB, i));
});

test('a failed packed batch keeps every value of it in memory, reports each one, and they spill on retry', async (t) => {
  let fail = true;
  const enospc = Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
  const { store, dir } = await openStore(t, {
    memoryLimit: 10 * MiB,
    retryDelayMs: 30,
    wrap: (d) => spy(d, (b, real) => (fail ? Promise.reject(enospc) : real(b))).disk,
  });
  const errors: unknown[] = [];
  store.on('error', (err) => errors.push(err));
  const values = Array.from({ length: 50 }, (_, i) => f64(2 * KiB, i));
  values.forEach((v, i) => store.set(`k${i}`, v));
  assert.equal(await store.evict(), 0);
  for (let i = 0; i < 50; i++) assert.equal(store.peek(`k${i}`), values[i], 'the very same object, still in memory');
  assert.equal(errors.length, 50);
  assert.ok(errors.every((err) => err instanceof TierWriteError && /ENOSPC/.test(err.message)));
  await assertSpillsOnRetry(store, dir, values, () => (fail = false));
});

test('a value a packed batch fails stays in memory; the rest of its batch is stored', async (t) => {
  let tier: DiskTier | undefined;
  // Fails every third value of each batch as the tier does a value it refuses: nothing of it kept.
  const failThirds = async (b: PackedBatch, real: (b: PackedBatch) => Promise<WriteResults>): Promise<WriteResults> => {
    const results = await real(b);
    for (let k = 0; k < b.ids.length; k += 3) {
      await tier!.delete(b.ids[k]);
      results[k] = { status: 'rejected', reason: Object.assign(new Error('EIO: injected'), { code: 'EIO' }) };
    }
    return results;
  };
  const { store } = await openStore(t, { memoryLimit: 10 * MiB, retryDelayMs: 60_000, wrap: (d) => (tier = spy(d, failThirds).disk) });
  const errors: unknown[] = [];
  store.on('error', (err) => errors.push(err));
  const values = Array.from({ length: 30 }, (_, i) => f64(2 * KiB, i));
  values.forEach((v, i) => store.set(`k${i}`, v));
  await store.evict();
  const where = values.map((_, i) => store.where(`k${i}`));
  assert.equal(where.filter((w) => w === 'memory').length, errors.length);
  assert.ok(errors.length >= 10, `${errors.length} values failed`);
  assert.ok(where.filter((w) => w === 'disk').length >= 1);
  assert.deepEqual(store[checkInvariants](), []);
  for (let i = 0; i < 30; i++) assert.deepEqual(await store.get(`k${i}`), values[i]);
});
