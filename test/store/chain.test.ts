import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CompressedMemoryTier } from '../../src/tiers/compressed-memory.js';
import { DiskTier, InvalidArgumentError, SpillStore, TiersFullError, type Tier } from '../../src/index.js';
import { checkInvariants } from '../../src/store/spill-store.js';
import { KiB, MiB, f64, openStore } from '../helpers/store.js';
import { onCleanup } from '../helpers/cleanup.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait.js';

/** Compressible data: a rounded random walk. */
function walk(n: number, seed: number): Float64Array {
  const a = new Float64Array(n);
  let x = seed;
  let s = seed * 7919 + 1;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) % 2147483648;
    x += s % 3 === 0 ? 0.5 : -0.25;
    a[i] = Math.round(x * 4) / 4;
  }
  return a;
}

async function openChain(t: import('node:test').TestContext, compressedCapacity: number): Promise<{ store: SpillStore; compressed: CompressedMemoryTier }> {
  const dir = await tempDir(t);
  const compressed = new CompressedMemoryTier({ name: 'lz4', capacity: compressedCapacity });
  const store = await SpillStore.open({
    memoryLimit: 256 * KiB,
    monitorIntervalMs: 0,
    tiers: [compressed, new DiskTier({ directory: dir })],
  });
  onCleanup(t, () => store.close());
  return { store, compressed };
}

test('values flow memory → compressed memory → disk, coldest first; where() names the tier', async (t) => {
  // 64 KiB each, stored in ~13 KiB: the tier holds about seven.
  const { store } = await openChain(t, 100 * KiB);
  for (let i = 0; i < 16; i++) {
    store.set(`k${i}`, walk(8 * KiB, i));
    await store.flush();
  }
  await waitFor(() => store.stats().tiers[0].bytes <= 100 * KiB, 'demotion');
  await store.flush();
  const places = Array.from({ length: 16 }, (_, i) => store.where(`k${i}`));
  assert.ok(places.includes('disk'), places.join());
  assert.ok(places.includes('lz4'), places.join());
  assert.equal(places[15], 'memory');
  // The oldest went furthest down.
  t.diagnostic(places.join());
  assert.equal(places[0], 'disk');
  assert.ok(places.lastIndexOf('disk') < places.indexOf('lz4'), places.join());
  const tiers = store.stats().tiers;
  assert.ok(tiers[0].demotions > 0);
  assert.ok((tiers[0].compressionRatio ?? 1) > 1.5, `ratio ${tiers[0].compressionRatio}`);
  assert.deepEqual(store[checkInvariants](), []);
  for (let i = 0; i < 16; i++) assert.deepEqual(await store.get(`k${i}`), walk(8 * KiB, i));
});

test('reading a value from a lower tier brings it to memory and keeps the lower copy', async (t) => {
  const { store } = await openChain(t, 1 * MiB);
  store.set('k', walk(8 * KiB, 1));
  await store.evict();
  assert.equal(store.where('k'), 'lz4');
  const writes = store.stats().counters.diskWrites;
  const value = await store.get('k');
  assert.equal(store.where('k'), 'memory');
  assert.deepEqual(value, walk(8 * KiB, 1));
  await store.evict();
  assert.equal(store.where('k'), 'lz4');
  assert.equal(store.stats().counters.diskWrites, writes, 'evicting again wrote nothing');
});

test('a value too large for the upper tier goes straight to the next one', async (t) => {
  const { store } = await openChain(t, 64 * KiB);
  store.set('small', walk(8 * KiB, 1)); // the tier learns how well values compress
  await store.evict();
  assert.equal(store.where('small'), 'lz4');
  store.set('big', f64(256 * KiB, Math.PI)); // 256 KiB that do not compress: never fit in 64 KiB
  await store.flush();
  assert.equal(store.where('big'), 'disk');
  assert.deepEqual(await store.get('big'), f64(256 * KiB, Math.PI));
});

test('deleting keys during demotion leaves no copy anywhere', async (t) => {
  const { store } = await openChain(t, 128 * KiB);
  for (let i = 0; i < 12; i++) store.set(`k${i}`, walk(8 * KiB, i));
  await store.evict();
  for (let i = 0; i < 12; i++) store.delete(`k${i}`);
  await store.flush();
  await waitFor(() => store.stats().disk.count === 0, 'all copies removed');
  assert.deepEqual(store[checkInvariants](), []);
});

test('a misconfigured chain is rejected at open', async (t) => {
  const dir = await tempDir(t);
  const disk = (name = 'disk'): Tier => new DiskTier({ directory: dir, name });
  await assert.rejects(SpillStore.open({ tiers: [disk('a'), disk('a')] }), (e: unknown) => e instanceof InvalidArgumentError && /two tiers/.test(e.message));
  await assert.rejects(SpillStore.open({ tiers: [disk('memory')] }), InvalidArgumentError);
  const noCapacity = Object.assign(disk('x'), {}) as Tier;
  Object.defineProperty(noCapacity, 'capacity', { value: 0 });
  await assert.rejects(SpillStore.open({ tiers: [noCapacity] }), /no capacity/);
  await assert.rejects(SpillStore.open({ tiers: [{} as Tier] }), InvalidArgumentError);
});

test('a lower tier that fails its writes leaves values in the tier above, and says so', async (t) => {
  const dir = await tempDir(t);
  const { FaultyTier } = await import('../../src/testing/index.js');
  const failing = new FaultyTier(new DiskTier({ directory: dir }), { failWrite: () => 'EIO' });
  const store = await SpillStore.open({
    memoryLimit: 256 * KiB,
    monitorIntervalMs: 0,
    tiers: [new CompressedMemoryTier({ name: 'lz4', capacity: 96 * KiB }), failing],
  });
  onCleanup(t, () => store.close());
  const errors: unknown[] = [];
  store.on('error', (err) => errors.push(err));
  for (let i = 0; i < 12; i++) {
    store.set(`k${i}`, walk(8 * KiB, i));
    await store.flush();
  }
  await store.evict();
  await store.flush();
  assert.ok(errors.length > 0, 'the failed moves were reported');
  assert.equal(store.stats().tiers[1].count, 0);
  // Nothing was lost: every value is in memory or in the upper tier.
  for (let i = 0; i < 12; i++) {
    assert.notEqual(store.where(`k${i}`), 'disk');
    assert.deepEqual(await store.get(`k${i}`), walk(8 * KiB, i));
  }
  assert.deepEqual(store[checkInvariants](), []);
});

test('writes in flight at once cannot together pass a tier capacity (the room check and the reservation are one step)', async (t) => {
  const { store, disk } = await openStore(t, { memoryLimit: 10 * MiB, diskCapacity: 200 * KiB, spillConcurrency: 2 });
  const errors: unknown[] = [];
  store.on('error', (err) => errors.push(err));
  // Two values of 120 KiB (not batched): each fits alone, not both.
  store.set('a', f64(120 * KiB, 1));
  store.set('b', f64(120 * KiB, 2));
  await store.evict();
  await store.flush();
  assert.deepEqual(store[checkInvariants](), []);
  assert.ok(disk.usage().bytes <= disk.capacity, `the tier holds ${disk.usage().bytes} bytes, capacity ${disk.capacity}`);
  assert.ok(errors.some((e) => e instanceof TiersFullError));
  assert.deepEqual([store.where('a'), store.where('b')].sort(), ['disk', 'memory']);
});

/** 1 MiB that lz4 stores in a few KiB: zeros but for one byte saying which value it is. */
function compressible(seed: number): Uint8Array {
  const bytes = new Uint8Array(1 * MiB);
  bytes[seed % bytes.length] = 1 + (seed % 255);
  return bytes;
}

// The chain admitted a value by its encoded size: a 1 MiB tier took no 1 MiB value that
// it would store in 5 KiB, and a 2 MiB one sent values to disk while holding 150 KiB.
test('a compressing tier admits and demotes by the bytes it stores, not by encoded size', async (t) => {
  const one = await openChain(t, 1 * MiB);
  one.store.set('z', compressible(1));
  await one.store.flush();
  assert.equal(one.store.where('z'), 'lz4', 'a 1 MiB value that compresses fits a 1 MiB tier');
  assert.deepEqual(await one.store.get('z'), compressible(1));

  const { store, compressed } = await openChain(t, 2 * MiB);
  // The first write lands before the others start: until then the tier has no ratio to go
  // by, and a value in flight counts at its full size.
  store.set('k0', compressible(0));
  await store.flush();
  for (let i = 1; i < 24; i++) store.set(`k${i}`, compressible(i));
  await store.flush();
  const places = Array.from({ length: 24 }, (_, i) => store.where(`k${i}`));
  t.diagnostic(`${places.join()}; lz4 holds ${compressed.usage().bytes} bytes`);
  assert.ok(!places.includes('disk'), `every value fits the compressed tier: ${places.join()}`);
  assert.ok(compressed.usage().bytes < 2 * MiB);
  assert.equal(store.stats().tiers[0].demotions, 0);
  assert.deepEqual(store[checkInvariants](), []);
  for (let i = 0; i < 24; i += 5) assert.deepEqual(await store.get(`k${i}`), compressible(i));
});

test('a compressing tier still moves values down once what it stores passes its capacity', async (t) => {
  const { store, compressed } = await openChain(t, 256 * KiB);
  // Incompressible: each stored at its full 64 KiB.
  for (let i = 0; i < 12; i++) store.set(`r${i}`, f64(64 * KiB, Math.PI * (i + 1)));
  await store.evict();
  await store.flush();
  await waitFor(() => compressed.usage().bytes <= 256 * KiB, 'demotion');
  const places = Array.from({ length: 12 }, (_, i) => store.where(`r${i}`));
  assert.ok(places.includes('disk') && places.includes('lz4'), places.join());
  for (let i = 0; i < 12; i += 3) assert.deepEqual(await store.get(`r${i}`), f64(64 * KiB, Math.PI * (i + 1)));
  assert.deepEqual(store[checkInvariants](), []);
});
