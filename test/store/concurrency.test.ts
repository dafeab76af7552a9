import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import { test } from 'node:test';
import { DiskTier, SpillStore } from '../../src/index.js';
import { SlowTier } from '../../src/testing/index.js';
import { KiB, MiB, f64, filesUnder, openStore } from '../helpers/store.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait.js';

test('delete during a spill cancels it cleanly: no orphan file, no resurrection', async (t) => {
  const { store, dir } = await openStore(t, { memoryLimit: 10 * MiB, wrap: (disk) => new SlowTier(disk, 40) });
  store.set('k', f64(64 * KiB, 1));
  const evicting = store.evict();
  assert.equal(store.stats().spilling.count, 1);
  assert.equal(store.delete('k'), true);
  assert.equal(store.has('k'), false);
  assert.equal(await evicting, 0);
  await store.flush();
  await waitFor(() => store.stats().disk.count === 0, 'cancelled file removal');
  await new Promise((resolve) => setTimeout(resolve, 60));
  assert.deepEqual(await filesUnder(dir), []);
  assert.equal(store.has('k'), false);
  assert.equal(store.stats().memory.count + store.stats().spilling.count, 0);
});

test('overwrite during a spill keeps the new value; the old write leaves nothing', async (t) => {
  const { store, dir } = await openStore(t, { memoryLimit: 10 * MiB, wrap: (disk) => new SlowTier(disk, 40) });
  store.set('k', 'old');
  const evicting = store.evict();
  store.set('k', 'new');
  await evicting;
  await store.flush();
  assert.equal(await store.get('k'), 'new');
  assert.equal(store.where('k'), 'memory');
  await waitFor(() => store.stats().disk.count === 0, 'old file removal');
  await new Promise((resolve) => setTimeout(resolve, 60));
  assert.deepEqual(await filesUnder(dir), []);
  await store.evict();
  assert.equal(await store.get('k'), 'new');
});

test('overwrite during a load: the load does not resurrect the old value', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB, wrap: (disk) => new SlowTier(disk, 40) });
  store.set('k', 'old');
  await store.evict();
  const loading = store.get('k');
  store.set('k', 'new');
  // The reader that asked before the overwrite gets what it asked for...
  assert.equal(await loading, 'old');
  // ...but the store holds only the new value.
  assert.equal(await store.get('k'), 'new');
  assert.equal(store.peek('k'), 'new');
  await store.evict();
  assert.equal(await store.get('k'), 'new');
});

test('delete during a load: the reader gets its value, the key stays deleted, the file goes', async (t) => {
  const { store, dir } = await openStore(t, { memoryLimit: 10 * MiB, wrap: (disk) => new SlowTier(disk, 40) });
  store.set('k', 'v');
  await store.evict();
  const loading = store.get('k');
  store.delete('k');
  assert.equal(await loading, 'v');
  assert.equal(store.has('k'), false);
  await waitFor(() => store.stats().disk.count === 0, 'file removal');
  await new Promise((resolve) => setTimeout(resolve, 60));
  assert.deepEqual(await filesUnder(dir), []);
});

test('many readers, writers and deleters on few keys keep the store consistent', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 256 * KiB, wrap: (disk) => new SlowTier(disk, 2) });
  const expected = new Map<string, number>();
  const ops: Promise<unknown>[] = [];
  for (let round = 0; round < 200; round++) {
    const key = `k${round % 7}`;
    if (round % 5 === 0) {
      store.delete(key);
      expected.delete(key);
    } else {
      store.set(key, f64(16 * KiB, round));
      expected.set(key, round);
    }
    for (const k of expected.keys()) ops.push(store.get(k).catch(() => undefined));
    if (round % 20 === 0) ops.push(store.evict());
    await new Promise((resolve) => setImmediate(resolve));
  }
  await Promise.all(ops);
  await store.flush();
  for (const [key, seed] of expected) assert.deepEqual(await store.get(key), f64(16 * KiB, seed));
  assert.equal(store.size, expected.size);
});

test('close during writes waits for them and leaves nothing behind', async (t) => {
  const parent = await tempDir(t);
  const store = await SpillStore.open({ memoryLimit: 256 * KiB, monitorIntervalMs: 0, tiers: [new SlowTier(new DiskTier({ directory: parent }), 30)] });
  for (let i = 0; i < 20; i++) store.set(`k${i}`, f64(64 * KiB, i));
  assert.ok(store.stats().spilling.count > 0);
  await store.close();
  assert.deepEqual(await fsp.readdir(parent), []);
  assert.equal(store.stats().disk.count, 0);
});

test('close removes every file and folder the store wrote', async (t) => {
  const parent = await tempDir(t);
  const store = await SpillStore.open({ memoryLimit: 256 * KiB, monitorIntervalMs: 0, directory: parent });
  for (let i = 0; i < 20; i++) store.set(`k${i}`, f64(64 * KiB, i));
  await store.flush();
  assert.ok((await filesUnder(parent)).length > 0);
  await store.close();
  assert.deepEqual(await fsp.readdir(parent), []);
});
