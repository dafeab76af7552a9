/** Small values spilled in batches (`Tier.writeMany`): success, failures, races, fallbacks. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CompressedMemoryTier, DiskTier, SpillStore, TierWrapper, TierWriteError, type Tier, type TierUsage, type WriteItem, type WriteResults } from '../../src/index.js';
import { FaultyTier, SlowTier } from '../../src/testing/index.js';
import { windowBatchBytes } from '../../src/store/batch-writer.js';
import { checkInvariants } from '../../src/store/spill-store.js';
import { KiB, MiB, assertSpillsOnRetry, f64, filesUnder, nextTick, openStore } from '../helpers/store.js';
import { onCleanup } from '../helpers/cleanup.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait.js';

test('small values spill in batches: few writeMany calls, every value readable, invariants kept', async (t) => {
  let faulty: FaultyTier | undefined;
  const { store, disk } = await openStore(t, { memoryLimit: 256 * KiB, wrap: (d) => (faulty = new FaultyTier(d)) });
  for (let i = 0; i < 600; i++) {
    store.set(`k${i}`, f64(KiB, i));
    if (store.paused) await store.whenResumed();
  }
  await store.evict();
  await store.flush();
  assert.ok(faulty !== undefined && faulty.batches > 0, 'writeMany was used');
  assert.ok(faulty.batches <= 60, `${faulty.batches} batches for 600 values`);
  const s = store.stats();
  assert.equal(s.counters.diskWrites, 600);
  assert.equal(disk.stats().writes, 600);
  assert.ok(disk.stats().details.flushes <= faulty.batches, `${disk.stats().details.flushes} flushes`);
  assert.deepEqual(store[checkInvariants](), []);
  for (let i = 0; i < 600; i++) assert.deepEqual(await store.get(`k${i}`), f64(KiB, i));
});

test('a failed batch keeps every value of it in memory, reports each one, and they spill on retry', async (t) => {
  let fail = true;
  let faulty: FaultyTier | undefined;
  const plan = { failBatch: () => (fail ? 'ENOSPC' : undefined) };
  const { store, dir } = await openStore(t, { memoryLimit: 10 * MiB, retryDelayMs: 30, wrap: (d) => (faulty = new FaultyTier(d, plan)) });
  const errors: unknown[] = [];
  store.on('error', (err) => errors.push(err));
  const values = Array.from({ length: 50 }, (_, i) => f64(2 * KiB, i));
  values.forEach((v, i) => store.set(`k${i}`, v));
  assert.equal(await store.evict(), 0);
  assert.equal(faulty?.batches, 1);
  for (let i = 0; i < 50; i++) {
    assert.equal(store.where(`k${i}`), 'memory');
    assert.equal(store.peek(`k${i}`), values[i], 'the very same object, still in memory');
  }
  assert.equal(errors.length, 50);
  for (const err of errors) {
    assert.ok(err instanceof TierWriteError);
    assert.match(err.message, /ENOSPC/);
  }
  assert.equal(store.stats().counters.writeErrors, 50);
  assert.equal(store.stats().spilling.count, 0);
  await assertSpillsOnRetry(store, dir, values, () => (fail = false));
});

test('a value the tier fails inside a batch stays in memory; the rest of its batch is stored', async (t) => {
  let faulty: FaultyTier | undefined;
  const plan = { failWrite: (id: number) => (id % 3 === 0 ? 'EIO' : undefined) };
  const { store } = await openStore(t, { memoryLimit: 10 * MiB, retryDelayMs: 60_000, wrap: (d) => (faulty = new FaultyTier(d, plan)) });
  const errors: unknown[] = [];
  store.on('error', (err) => errors.push(err));
  for (let i = 0; i < 30; i++) store.set(`k${i}`, f64(2 * KiB, i));
  await store.evict();
  const where = Array.from({ length: 30 }, (_, i) => store.where(`k${i}`));
  const failed = faulty?.writeFailures ?? 0;
  assert.ok(failed >= 9, `${failed} failures`);
  assert.equal(where.filter((w) => w === 'memory').length, failed);
  assert.equal(where.filter((w) => w === 'disk').length, 30 - failed);
  assert.equal(errors.length, failed);
  assert.equal(store.stats().counters.writeErrors, failed);
  for (let i = 0; i < 30; i++) assert.deepEqual(await store.get(`k${i}`), f64(2 * KiB, i));
  assert.deepEqual(store[checkInvariants](), []);
});

test('mixed sizes: small values go in batches, large and underestimated ones on their own', async (t) => {
  let faulty: FaultyTier | undefined;
  const { store, disk } = await openStore(t, { memoryLimit: 10 * MiB, wrap: (d) => (faulty = new FaultyTier(d)) });
  for (let i = 0; i < 20; i++) store.set(`small${i}`, f64(2 * KiB, i));
  for (let i = 0; i < 3; i++) store.set(`large${i}`, f64(256 * KiB, 100 + i));
  // Said to be small, encodes to 128 KiB: picked for a batch, then written alone.
  store.set('liar', f64(128 * KiB, 7), { size: 1000 });
  store.set('text', 'a string');
  await store.evict();
  await store.flush();
  assert.ok((faulty?.batches ?? 0) >= 1);
  const keys = [...store.keys()];
  for (const key of keys) assert.equal(store.where(key), 'disk', key);
  assert.equal(disk.usage().count, keys.length);
  for (let i = 0; i < 20; i++) assert.deepEqual(await store.get(`small${i}`), f64(2 * KiB, i));
  for (let i = 0; i < 3; i++) assert.deepEqual(await store.get(`large${i}`), f64(256 * KiB, 100 + i));
  assert.deepEqual(await store.get('liar'), f64(128 * KiB, 7));
  assert.equal(await store.get('text'), 'a string');
  assert.deepEqual(store[checkInvariants](), []);
});

test('keys deleted or overwritten while their batch is in flight: no stale value, no copy left behind', async (t) => {
  const { store, disk } = await openStore(t, { memoryLimit: 10 * MiB, wrap: (d) => new SlowTier(d, 50) });
  const values = Array.from({ length: 40 }, (_, i) => f64(2 * KiB, i));
  values.forEach((v, i) => store.set(`k${i}`, v));
  store.set('early', f64(2 * KiB, 99));
  const evicting = store.evict();
  // Deleted before its batch is even encoded.
  store.delete('early');
  await nextTick();
  assert.ok(store.stats().spilling.count > 0, 'the batch is in flight');
  // Still readable from memory while being written.
  assert.equal(store.peek('k30'), values[30]);
  assert.equal(store.where('k30'), 'memory');
  for (let i = 0; i < 10; i++) store.delete(`k${i}`);
  for (let i = 10; i < 20; i++) store.set(`k${i}`, `new ${i}`);
  await evicting;
  await store.flush();
  for (let i = 0; i < 10; i++) assert.equal(store.has(`k${i}`), false);
  assert.equal(store.has('early'), false);
  for (let i = 10; i < 20; i++) assert.equal(await store.get(`k${i}`), `new ${i}`);
  for (let i = 20; i < 40; i++) {
    assert.equal(store.where(`k${i}`), 'disk');
    assert.deepEqual(await store.get(`k${i}`), f64(2 * KiB, i));
  }
  // The copies of deleted and overwritten keys are removed in the background.
  await waitFor(() => disk.usage().count === 20, 'orphaned copies deleted');
  assert.deepEqual(store[checkInvariants](), []);
});

test('a tier without writeMany gets one write per value (one file each on a per-file disk)', async (t) => {
  const dir = await tempDir(t);
  const faulty = new FaultyTier(new DiskTier({ directory: dir, smallValueBytes: 0 }));
  assert.equal(faulty.writeMany, undefined, 'the wrapper does not invent a writeMany');
  const store = await SpillStore.open({ memoryLimit: 10 * MiB, monitorIntervalMs: 0, tiers: [faulty] });
  onCleanup(t, () => store.close());
  for (let i = 0; i < 30; i++) store.set(`k${i}`, f64(2 * KiB, i));
  await store.evict();
  assert.equal(faulty.batches, 0);
  assert.equal((await filesUnder(dir)).length, 30);
  for (let i = 0; i < 30; i++) assert.deepEqual(await store.get(`k${i}`), f64(2 * KiB, i));
});

/** A tier that reports itself full: new spills skip it. */
class FullTier extends TierWrapper {
  override usage(): TierUsage {
    return { count: 0, bytes: this.capacity };
  }
}

test('a batch that lands on a tier without writeMany is written there one value at a time', async (t) => {
  const dir = await tempDir(t);
  const top = new FullTier(new DiskTier({ directory: dir, name: 'top', capacity: MiB }));
  const bottom = new FaultyTier(new DiskTier({ directory: dir, name: 'bottom', smallValueBytes: 0 }));
  const tiers: Tier[] = [top, bottom];
  const store = await SpillStore.open({ memoryLimit: 10 * MiB, monitorIntervalMs: 0, tiers });
  onCleanup(t, () => store.close());
  for (let i = 0; i < 80; i++) store.set(`k${i}`, f64(2 * KiB, i));
  await store.evict();
  await store.flush();
  assert.equal(bottom.batches, 0);
  for (let i = 0; i < 80; i++) assert.equal(store.where(`k${i}`), 'bottom');
  assert.equal(bottom.usage().count, 80);
  for (let i = 0; i < 80; i++) assert.deepEqual(await store.get(`k${i}`), f64(2 * KiB, i));
});

test('maxSpill: a batch that does not fit as a whole is written value by value, up to the cap', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB, maxSpill: 40 * KiB });
  store.on('error', () => undefined);
  for (let i = 0; i < 30; i++) store.set(`k${i}`, f64(2 * KiB, i));
  await store.evict();
  await store.flush();
  const onDisk = [...store.keys()].filter((k) => store.where(k) === 'disk').length;
  assert.ok(onDisk >= 15 && onDisk < 30, `${onDisk} values on disk`);
  assert.ok(store.stats().disk.bytes <= 40 * KiB);
  assert.ok(store.stats().counters.spillCapRejections > 0);
  for (let i = 0; i < 30; i++) assert.deepEqual(await store.get(`k${i}`), f64(2 * KiB, i));
});

test('encoding a batch of small objects gives the event loop a turn every few milliseconds', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 256 * MiB });
  const record = (i: number): unknown => ({ rows: Array.from({ length: 60 }, (_, j) => ({ id: i * 100 + j, name: `row ${j}`, score: j / 3, tags: ['a', 'b'] })) });
  // One batch of 1024 values encoded while a callback watches the loop; the longest wait
  // between its turns, and how long the spill took.
  const watchOneBatch = async (round: number): Promise<{ longest: number; elapsed: number }> => {
    for (let i = 0; i < 1024; i++) store.set(`r${round}-k${i}`, record(i), { size: 4 * KiB });
    // Warm the encoder up first.
    await store.evict(4 * KiB);
    const writes = store.stats().counters.diskWrites;
    let last = performance.now();
    let longest = 0;
    let watching = true;
    const ping = (): void => {
      const now = performance.now();
      longest = Math.max(longest, now - last);
      last = now;
      if (watching) setImmediate(ping);
    };
    setImmediate(ping);
    const started = performance.now();
    await store.evict();
    const elapsed = performance.now() - started;
    watching = false;
    assert.equal(store.stats().counters.diskWrites - writes, 1023);
    return { longest, elapsed };
  };
  // Encoded in one go, a batch would hold the loop for its whole encoding; in slices it
  // gives the loop a turn every few milliseconds. The host may take the core away in the
  // middle of any slice, so the best of three batches is judged: a loop that is never given
  // a turn fails all three.
  const gaveTurns = (r: { longest: number; elapsed: number }): boolean => r.longest < Math.max(40, r.elapsed / 3);
  const rounds: { longest: number; elapsed: number }[] = [];
  for (let round = 0; round < 3; round++) {
    const watched = await watchOneBatch(round);
    rounds.push(watched);
    if (gaveTurns(watched)) break;
  }
  const best = rounds.reduce((a, b) => (b.longest < a.longest ? b : a));
  assert.ok(
    gaveTurns(best),
    `the loop waited ${rounds.map((r) => `${r.longest.toFixed(1)} ms for a turn over ${r.elapsed.toFixed(0)} ms of spilling`).join('; ')}`,
  );
  assert.deepEqual(await store.get('r0-k1000'), record(1000));
});

test('a chain whose first tier is compressed memory: batches land there and older values move down', async (t) => {
  const dir = await tempDir(t);
  const lz4 = new FaultyTier(new CompressedMemoryTier({ name: 'lz4', capacity: 256 * KiB }));
  const store = await SpillStore.open({ memoryLimit: 128 * KiB, monitorIntervalMs: 0, tiers: [lz4, new DiskTier({ directory: dir })] });
  onCleanup(t, () => store.close());
  for (let i = 0; i < 400; i++) {
    store.set(`k${i}`, f64(2 * KiB, i));
    if (store.paused) await store.whenResumed();
  }
  await store.evict();
  await store.flush();
  assert.ok(lz4.batches > 0, 'the compressed tier took batches');
  const where = Array.from({ length: 400 }, (_, i) => store.where(`k${i}`));
  assert.ok(where.includes('lz4') && where.includes('disk'), 'values in both tiers');
  assert.ok(lz4.usage().bytes <= 256 * KiB);
  assert.ok((store.stats().tiers.find((s) => s.name === 'lz4')?.demotions ?? 0) > 0);
  assert.deepEqual(store[checkInvariants](), []);
  for (let i = 0; i < 400; i++) assert.deepEqual(await store.get(`k${i}`), f64(2 * KiB, i));
});

/** A tier whose writeMany stores everything but reports only the first result. */
class ForgetfulTier extends TierWrapper {
  protected override async writeBatch(items: readonly WriteItem[]): Promise<WriteResults> {
    return (await super.writeBatch(items)).slice(0, 1);
  }
}

test('a tier that answers a batch with too few results: the values without one stay in memory, nothing is stuck', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB, retryDelayMs: 60_000, wrap: (d) => new ForgetfulTier(d) });
  const errors: unknown[] = [];
  store.on('error', (err) => errors.push(err));
  for (let i = 0; i < 10; i++) store.set(`k${i}`, f64(2 * KiB, i));
  await store.evict();
  await store.flush();
  const where = Array.from({ length: 10 }, (_, i) => store.where(`k${i}`));
  assert.equal(where.filter((w) => w === 'disk').length, 1);
  assert.equal(errors.length, 9);
  assert.match(String(errors[0]), /no result/);
  assert.equal(store.stats().spilling.count, 0);
  assert.deepEqual(store[checkInvariants](), []);
  for (let i = 0; i < 10; i++) assert.deepEqual(await store.get(`k${i}`), f64(2 * KiB, i));
});

/** Records the bytes of every writeMany call it forwards. */
class BatchSizes extends TierWrapper {
  readonly sizes: number[] = [];
  protected override writeBatch(items: readonly WriteItem[]): Promise<WriteResults> {
    this.sizes.push(items.reduce((sum, item) => sum + item.byteLength, 0));
    return super.writeBatch(items);
  }
}

test('batches are cut to a third of the window between target and pause, so several are in flight before producers pause', async (t) => {
  assert.equal(windowBatchBytes({ targetBytes: 18 * MiB, pauseBytes: 24 * MiB }), 2 * MiB);
  assert.equal(windowBatchBytes({ targetBytes: 10 * MiB, pauseBytes: 10 * MiB }), MiB, 'no window: batches of 1 MiB');
  assert.equal(windowBatchBytes({ targetBytes: 600 * MiB, pauseBytes: Infinity }), Infinity, 'pause off: no limit from the window');
  const spill = async (pause: number | false): Promise<number[]> => {
    let sizes: BatchSizes | undefined;
    const { store } = await openStore(t, { memoryLimit: 32 * MiB, pause, wrap: (d) => (sizes = new BatchSizes(d)) });
    for (let i = 0; i < 12_000; i++) {
      store.set(`k${i}`, f64(4 * KiB, i));
      if (store.paused) await store.whenResumed();
    }
    await store.evict();
    await store.flush();
    assert.equal(store.stats().counters.diskWrites, 12_000);
    for (const i of [0, 5_000, 11_999]) assert.deepEqual(await store.get(`k${i}`), f64(4 * KiB, i));
    await store.close();
    return sizes?.sizes ?? [];
  };
  // A 32 MiB store pauses at 25.6 MiB and spills above 19.2: batches of at most ~2.1 MiB.
  const windowed = await spill(0.8);
  const window = (6.4 * MiB) / 3;
  assert.ok(Math.max(...windowed) <= window + 8 * KiB, `largest batch ${Math.max(...windowed)} B`);
  assert.ok(Math.max(...windowed) > MiB, 'cut by the window, not the floor');
  // Without a pause level, the 4 MiB / 1,024 values cap alone.
  const unpaused = await spill(false);
  assert.ok(Math.max(...unpaused) > 1.5 * window, `largest batch without pause ${Math.max(...unpaused)} B`);
});
