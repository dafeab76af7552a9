import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClosedError, DiskTier, InvalidArgumentError, KeyNotFoundError, SpillStore } from '../../src/index.js';
import { SlowTier } from '../../src/testing/index.js';
import { majorCollectionWatchers } from '../../src/runtime/garbage-collection.js';
import { KiB, MiB, f64, filesUnder, openStore } from '../helpers/store.js';
import { tempDir } from '../helpers/temp-dir.js';

test('set, get, peek, has, where, delete on in-memory values', async (t) => {
  const { store } = await openStore(t);
  const value = { a: 1, b: [1, 2, 3] };
  store.set('k', value);
  assert.equal(store.has('k'), true);
  assert.equal(store.peek('k'), value);
  assert.equal(await store.get('k'), value);
  assert.equal(store.where('k'), 'memory');
  assert.equal(store.size, 1);
  assert.equal(store.delete('k'), true);
  assert.equal(store.delete('k'), false);
  assert.equal(store.has('k'), false);
  assert.equal(store.peek('k'), undefined);
  assert.equal(store.where('k'), undefined);
});

test('get of a missing key rejects with KeyNotFoundError', async (t) => {
  const { store } = await openStore(t);
  await assert.rejects(store.get('nope'), (err: unknown) => err instanceof KeyNotFoundError && err.code === 'SPW_ERR_KEY_NOT_FOUND');
  await assert.rejects(store.acquire(['nope']), KeyNotFoundError);
  assert.throws(() => store.createReadStream('nope'), KeyNotFoundError);
});

test('in-memory get resolves to the same promise each time and does no I/O', async (t) => {
  const { store } = await openStore(t);
  store.set('k', 'v');
  const before = store.stats().counters;
  assert.equal(store.get('k'), store.get('k'));
  assert.equal(await store.get('k'), 'v');
  const after = store.stats().counters;
  assert.equal(after.diskReads, before.diskReads);
});

test('overwriting a key replaces its value and its size', async (t) => {
  const { store } = await openStore(t);
  store.set('k', new Uint8Array(1000));
  store.set('k', new Uint8Array(10));
  assert.equal((await store.get('k') as Uint8Array).length, 10);
  assert.ok(store.stats().memory.bytes < 1000);
  assert.equal(store.stats().memory.count, 1);
});

test('undefined and null are values like any other', async (t) => {
  const { store } = await openStore(t);
  store.set('u', undefined);
  store.set('n', null);
  assert.equal(store.has('u'), true);
  assert.equal(await store.get('u'), undefined);
  assert.equal(await store.get('n'), null);
  await store.evict();
  assert.equal(store.where('u'), 'disk');
  assert.equal(await store.get('u'), undefined);
  assert.equal(await store.get('n'), null);
});

test('keys must be strings; sizes must be sane', async (t) => {
  const { store } = await openStore(t);
  assert.throws(() => store.set(42 as unknown as string, 1), InvalidArgumentError);
  assert.throws(() => store.set('k', 1, { size: -1 }), (err: unknown) => err instanceof InvalidArgumentError && err.code === 'SPW_ERR_INVALID_ARG');
  assert.throws(() => store.set('k', 1, { size: Number.NaN }), InvalidArgumentError);
  assert.equal(store.has('k'), false);
});

test('bad options are rejected at open with a clear error', async (t) => {
  const dir = await tempDir(t);
  const bad = [
    { memoryLimit: 'lots' },
    { memoryLimit: -5 },
    { memoryLimit: 0 },
    { target: 1.5 },
    { spill: 0 },
    { pause: Number.NaN },
    { monitorIntervalMs: -1 },
    { spillConcurrency: 0 },
    { maxSpill: 'x' },
    { directory: '' },
    { tiers: [] },
  ];
  for (const options of bad) {
    await assert.rejects(SpillStore.open({ directory: dir, ...options } as never), InvalidArgumentError, JSON.stringify(options));
  }
});

test('memoryLimit accepts units', async (t) => {
  const { store } = await openStore(t, { memoryLimit: '512 MiB' });
  assert.equal(store.memoryLimit, 512 * MiB);
  assert.equal(store.targetBytes, Math.floor(0.6 * 512 * MiB));
});

test('a second close() waits for the first: both resolve once every file is removed', async (t) => {
  const { store, dir } = await openStore(t, { memoryLimit: 10 * MiB, wrap: (disk) => new SlowTier(disk, 50) });
  store.set('a', f64(128 * KiB, 1));
  store.set('b', f64(128 * KiB, 2));
  await store.evict();
  store.set('c', f64(128 * KiB, 3));
  void store.evict();
  const first = store.close();
  await store.close();
  assert.deepEqual(await filesUnder(dir), [], 'the second close resolved before the store was closed');
  await first;
});

test('an open() whose tier fails leaves no watcher of V8 collections behind (collectGarbage)', async (t) => {
  const before = majorCollectionWatchers();
  const dir = await tempDir(t);
  const good = new DiskTier({ directory: dir });
  const failing = new DiskTier({ directory: dir, name: 'failing' });
  failing.open = () => Promise.reject(new Error('cannot open'));
  await assert.rejects(SpillStore.open({ collectGarbage: true, monitorIntervalMs: 0, tiers: [good, failing] }), /cannot open/);
  assert.equal(majorCollectionWatchers(), before);
  assert.deepEqual(await filesUnder(dir), [], 'the tier that opened is closed again');
});

test('after close every call fails with ClosedError and close is idempotent', async (t) => {
  const { store } = await openStore(t);
  store.set('k', 1);
  await store.close();
  await store.close();
  assert.throws(() => store.set('k', 2), ClosedError);
  await assert.rejects(store.get('k'), (err: unknown) => err instanceof ClosedError && err.code === 'SPW_ERR_CLOSED');
  await assert.rejects(store.acquire(['k']), ClosedError);
  await assert.rejects(store.evict(), ClosedError);
});
