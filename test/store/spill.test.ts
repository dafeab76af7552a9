import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SlowTier } from '../../src/testing/index.js';
import { KiB, MiB, f64, filesUnder, openStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';

test('over target, the least recently used values are spilled in the background', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 1 * MiB, target: 0.5 });
  for (let i = 0; i < 3; i++) store.set(`k${i}`, f64(128 * KiB, i));
  assert.equal(store.stats().counters.diskWrites + store.stats().spilling.count, 0);
  // Touch k0 so that k1 becomes the least recently used.
  store.peek('k0');
  store.set('k3', f64(128 * KiB, 3));
  await store.flush();
  assert.ok(store.residentBytes <= store.targetBytes, `${store.residentBytes} <= ${store.targetBytes}`);
  assert.deepEqual(['k0', 'k1', 'k2', 'k3'].map((k) => store.where(k)), ['memory', 'disk', 'memory', 'memory']);
  for (let i = 4; i < 8; i++) store.set(`k${i}`, f64(128 * KiB, i));
  await store.flush();
  assert.ok(store.residentBytes <= store.targetBytes);
  assert.equal(store.where('k7'), 'memory');
  for (let i = 0; i < 8; i++) assert.deepEqual(await store.get(`k${i}`), f64(128 * KiB, i));
});

test('a value set cold is spilled before older values; a read warms it', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 1 * MiB, target: 0.9 });
  const where = (): string[] => ['old', 'cold-a', 'cold-b', 'new'].map((k) => store.where(k) ?? 'none');
  store.set('old', f64(64 * KiB, 0));
  store.set('cold-a', f64(64 * KiB, 1), { cold: true });
  store.set('cold-b', f64(64 * KiB, 2), { cold: true });
  store.set('new', f64(64 * KiB, 3));
  await store.evict(1);
  assert.deepEqual(where(), ['memory', 'memory', 'disk', 'memory'], 'the latest cold value goes first');
  await store.evict(1);
  assert.deepEqual(where(), ['memory', 'disk', 'disk', 'memory']);
  store.set('cold-c', f64(64 * KiB, 4), { cold: true });
  store.peek('cold-c');
  await store.evict(1);
  assert.equal(store.where('cold-c'), 'memory', 'read since it was set: no longer cold');
  assert.equal(store.where('old'), 'disk', 'the least recently used goes next');
  for (const [k, i] of [['old', 0], ['cold-a', 1], ['cold-b', 2], ['new', 3], ['cold-c', 4]] as const) assert.deepEqual(await store.get(k), f64(64 * KiB, i));
});

test('set() does no I/O: spilling starts after it returns', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 256 * KiB });
  for (let i = 0; i < 10; i++) store.set(`k${i}`, f64(64 * KiB, i));
  const s = store.stats();
  assert.equal(s.counters.diskWrites, 0);
  assert.equal(s.memory.count + s.spilling.count, 10);
  await store.flush();
  assert.ok(store.stats().counters.diskWrites > 0);
});

test('a value being written stays readable from memory until the write completes', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 256 * KiB, wrap: (disk) => new SlowTier(disk, 100) });
  const value = f64(200 * KiB, 1);
  store.set('big', value); // larger than the target: straight to disk
  assert.equal(store.stats().spilling.count, 1);
  assert.equal(store.peek('big'), value);
  assert.equal(await store.get('big'), value);
  assert.equal(store.where('big'), 'memory');
  await store.flush();
  assert.equal(store.where('big'), 'disk');
  assert.equal(store.stats().spilling.count, 0);
});

for (const [label, bytes] of [
  ['a small value (batched)', 8 * KiB],
  ['a value written on its own', 96 * KiB],
] as const) {
  test(`${label} read while it is written stays in memory; something older goes instead`, async (t) => {
    const { store } = await openStore(t, { memoryLimit: 1 * MiB, target: 0.5, wrap: (disk) => new SlowTier(disk, 50) });
    const count = Math.ceil((0.5 * MiB) / bytes) + 2; // just over target: the oldest ones are spilled
    for (let i = 0; i < count; i++) store.set(`k${i}`, f64(bytes, i));
    assert.ok(store.stats().spilling.count > 0, 'the oldest values are being written');
    const read = await store.get('k0');
    await store.flush();
    assert.equal(store.where('k0'), 'memory', 'the value read during its write is kept');
    assert.equal(await store.get('k0'), read, 'and no second copy is made');
    assert.ok(store.residentBytes <= store.targetBytes, `${store.residentBytes} <= ${store.targetBytes}`);
    assert.ok(
      Array.from({ length: count }, (_, i) => store.where(`k${i}`)).includes('disk'),
      'older values were dropped in its place',
    );
  });
}

test('a value larger than the target goes straight to disk, leaving the others in memory', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 1 * MiB });
  store.set('small', f64(8 * KiB, 1));
  store.set('huge', f64(2 * MiB, 2));
  await store.flush();
  assert.equal(store.where('small'), 'memory');
  assert.equal(store.where('huge'), 'disk');
  assert.deepEqual(await store.get('huge'), f64(2 * MiB, 2));
});

test('evict(bytes) spills LRU first and resolves to the bytes evicted', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  for (let i = 0; i < 4; i++) store.set(`k${i}`, f64(64 * KiB, i));
  const evicted = await store.evict(100 * KiB);
  assert.ok(evicted >= 100 * KiB && evicted < 200 * KiB, String(evicted));
  assert.equal(store.where('k0'), 'disk');
  assert.equal(store.where('k1'), 'disk');
  assert.equal(store.where('k2'), 'memory');
  const all = await store.evict();
  assert.ok(all >= 2 * 64 * KiB);
  assert.equal(store.stats().memory.count, 0);
});

test('after a read, the disk copy is kept: evicting again writes nothing', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  store.set('k', f64(64 * KiB, 7));
  await store.evict();
  const writes = store.stats().counters.diskWrites;
  let value: unknown = await store.get('k');
  assert.equal(store.where('k'), 'memory');
  assert.equal(store.stats().disk.count, 1);
  value = undefined;
  assert.equal(value, undefined);
  await store.evict();
  assert.equal(store.stats().counters.diskWrites, writes);
  assert.equal(store.where('k'), 'disk');
});

test('flush resolves only when no write is in flight', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 128 * KiB, wrap: (disk) => new SlowTier(disk, 30) });
  for (let i = 0; i < 6; i++) store.set(`k${i}`, f64(64 * KiB, i));
  await store.flush();
  assert.equal(store.stats().spilling.count, 0);
});

test('large spilled values get a file each, which disappears with delete', async (t) => {
  const { store, dir } = await openStore(t, { memoryLimit: 10 * MiB });
  for (let i = 0; i < 3; i++) store.set(`k${i}`, f64(1 * MiB, i));
  await store.evict();
  assert.equal((await filesUnder(dir)).length, 3);
  store.delete('k1');
  await waitFor(() => store.stats().disk.count === 2, 'file removal');
  assert.equal((await filesUnder(dir)).length, 2);
});

test('reads that bring values back stay under target even while every write slot is busy', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 512 * KiB, wrap: (disk) => new SlowTier(disk, 150) });
  const held = Array.from({ length: 16 }, (_, i) => f64(64 * KiB, i));
  held.forEach((value, i) => store.set(`k${i}`, value));
  await store.evict();
  assert.equal(store.stats().detached.count, 16);
  // Two slow writes occupy both write slots.
  store.set('x1', f64(64 * KiB, 100));
  store.set('x2', f64(64 * KiB, 101));
  const writing = store.evict();
  let peak = 0;
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 16; i++) {
      assert.equal(await store.get(`k${i}`), held[i]); // weak hits: no I/O
      peak = Math.max(peak, store.residentBytes - store.stats().spilling.bytes);
    }
  }
  assert.ok(peak <= store.targetBytes + 64 * KiB + 64, `peak ${peak} vs target ${store.targetBytes}`);
  await writing;
});

test('evict() also drops the values whose writes the pump had started, and counts them', async (t) => {
  // The writes take 150 ms: those the pump starts on set() are still in flight at evict().
  const { store } = await openStore(t, { memoryLimit: 512 * KiB, wrap: (disk) => new SlowTier(disk, 150) });
  const values = Array.from({ length: 16 }, (_, i) => f64(64 * KiB, i));
  values.forEach((value, i) => store.set(`k${i}`, value));
  const inFlight = store.stats().spilling.count;
  assert.ok(inFlight > 0, 'the pump started writes before evict()');
  const evicted = await store.evict();
  // Without evict(), a pump write keeps its value in memory once memory is back under target.
  assert.equal(store.residentBytes, 0, 'nothing left in memory');
  assert.equal(store.stats().detached.count, 16);
  assert.equal(evicted, store.stats().detached.bytes, 'evict() reports every value it dropped');
  for (let i = 0; i < 16; i++) assert.equal(store.where(`k${i}`), 'disk');
});

test('evict(bytes) with enough in the LRU leaves the pump writes to the memory level', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 512 * KiB, wrap: (disk) => new SlowTier(disk, 150) });
  Array.from({ length: 16 }, (_, i) => f64(64 * KiB, i)).forEach((value, i) => store.set(`k${i}`, value));
  const lru = store.residentBytes - store.stats().spilling.bytes;
  assert.ok(lru > 64 * KiB, 'some values wait in the LRU');
  const evicted = await store.evict(1);
  assert.ok(evicted > 0 && evicted <= lru, `evicted ${evicted} of the LRU's ${lru}`);
  await store.flush();
  assert.ok(store.residentBytes > 0, 'the pump kept what fits under target');
});
