import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KiB, MiB, f64, openStore } from '../helpers/store.js';

const any = (): boolean => true;

test('consume takes out a value the store holds alone in memory: the same object, the key gone, not freed', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 16 * MiB });
  const a = f64(256 * KiB, 1);
  store.set('a', a, { owned: true });
  assert.equal(await store.consume('a', any), a);
  assert.equal(store.has('a'), false);
  assert.equal(a.buffer.byteLength, 256 * KiB, 'the taker has the memory now: not detached');
  assert.equal(store.stats().counters.freedBytes, 0);
  assert.equal(await store.consume('a', any), undefined, 'gone: nothing to take');
});

test('consume leaves the key as it is when the value is shared, pinned, spilled or refused', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 16 * MiB });
  store.set('spilled', f64(64 * KiB, 5), { owned: true });
  await store.evict();
  assert.notEqual(store.where('spilled'), 'memory');
  store.set('plain', f64(64 * KiB, 1)); // not set as owned: the caller may still hold it
  store.set('handed', f64(64 * KiB, 2), { owned: true });
  await store.get('handed');
  store.set('pinned', f64(64 * KiB, 3), { owned: true });
  const lease = await store.acquire(['pinned'], { transient: true }); // pins, and leaves it owned
  for (const key of ['plain', 'handed', 'pinned']) assert.equal(store.where(key), 'memory', key);
  for (const key of ['plain', 'handed', 'pinned', 'spilled']) {
    assert.equal(await store.consume(key, any), undefined, key);
    assert.equal(store.has(key), true, key);
  }
  lease.release();
  assert.deepEqual(await store.consume('pinned', any), f64(64 * KiB, 3), 'unpinned: taken');
  store.set('refused', f64(64 * KiB, 4), { owned: true });
  assert.equal(await store.consume('refused', () => false), undefined);
  assert.deepEqual(await store.get('refused'), f64(64 * KiB, 4));
  assert.deepEqual(await store.get('spilled'), f64(64 * KiB, 5));
});
