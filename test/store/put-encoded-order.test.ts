import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeToBuffer } from '../../src/transfer/index.js';
import { checkInvariants } from '../../src/store/spill-store.js';
import { MiB, f64, filesUnder, openStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';

// A key's versions, not flags (docs/architecture.md): work still running for an older call
// must never undo a later one. putEncoded's write used to replace whatever held the key when
// it *finished*, so a delete made meanwhile was undone and a later set overwritten.

test('a key deleted while a putEncoded of it writes stays deleted, and the written file goes', async (t) => {
  const { store, dir } = await openStore(t, { memoryLimit: 10 * MiB });
  const bytes = await encodeToBuffer(f64(2 * MiB, 1));
  store.set('k', 'old');
  const put = store.putEncoded('k', bytes, bytes.byteLength);
  assert.equal(store.delete('k'), true);
  await put;
  assert.equal(store.has('k'), false, 'the delete made after the call wins');
  assert.equal(store.size, 0);
  await waitFor(() => store.stats().disk.count === 0, 'the discarded copy to be deleted');
  assert.deepEqual(await filesUnder(dir), []);
  assert.deepEqual(store[checkInvariants](), []);
});

test('a key deleted before it existed, while a putEncoded of it writes, does not appear afterwards', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  const bytes = await encodeToBuffer(f64(2 * MiB, 1));
  const put = store.putEncoded('k', bytes, bytes.byteLength);
  store.delete('k');
  await put;
  assert.equal(store.has('k'), false);
});

test('a set made while a putEncoded of the same key writes is not overwritten by it', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  const bytes = await encodeToBuffer(f64(2 * MiB, 1));
  const put = store.putEncoded('k', bytes, bytes.byteLength);
  store.set('k', 'newer');
  await put;
  assert.equal(await store.get('k'), 'newer');
  await waitFor(() => store.stats().disk.count === 0, 'the discarded copy to be deleted');
  assert.deepEqual(store[checkInvariants](), []);
});

test('of two putEncoded calls of one key, the later call wins whichever finishes last', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  const first = await encodeToBuffer(f64(4 * MiB, 1));
  const second = await encodeToBuffer('small');
  const a = store.putEncoded('k', first, first.byteLength);
  const b = store.putEncoded('k', second, second.byteLength);
  await Promise.all([a, b]);
  assert.equal(await store.get('k'), 'small');
  await waitFor(() => store.stats().disk.count === 1, 'the discarded copy to be deleted');
});

test('a putEncoded with nothing made meanwhile still replaces the value it found', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  const bytes = await encodeToBuffer(f64(1 * MiB, 3));
  store.set('k', 'old');
  await store.putEncoded('k', bytes, bytes.byteLength);
  assert.deepEqual(await store.get('k'), f64(1 * MiB, 3));
  // And a failed one leaves a later put free to land.
  const bad = Buffer.from(bytes);
  bad[bad.byteLength - 1] ^= 1;
  await assert.rejects(store.putEncoded('j', bad, bad.byteLength));
  await store.putEncoded('j', bytes, bytes.byteLength);
  assert.equal(store.where('j'), 'disk');
});
