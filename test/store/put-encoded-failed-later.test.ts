import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeToBuffer } from '../../src/transfer/index.js';
import { checkInvariants } from '../../src/store/spill-store.js';
import { MiB, f64, openStore } from '../helpers/store.js';

// A putEncoded that fails stores nothing and changes nothing: it must not cancel an earlier
// putEncoded of the same key still writing (which then resolved as if stored, but was not).

test('a later putEncoded of the key that fails its checksum does not discard an earlier one still writing', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  const good = await encodeToBuffer(f64(4 * MiB, 1));
  const bad = Buffer.from(await encodeToBuffer('small'));
  bad[bad.byteLength - 1] ^= 1;
  const a = store.putEncoded('k', good, good.byteLength);
  const b = store.putEncoded('k', bad, bad.byteLength);
  await assert.rejects(b);
  await a; // resolved: stored, as far as its caller knows
  assert.equal(store.has('k'), true, 'the earlier putEncoded, which succeeded, is not lost');
  assert.deepEqual(await store.get('k'), f64(4 * MiB, 1));
  assert.deepEqual(store[checkInvariants](), []);
});

test('a failed putEncoded of the key finishing after an earlier one does not discard it either', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  const good = await encodeToBuffer('small');
  const bad = Buffer.from(await encodeToBuffer(f64(4 * MiB, 1)));
  bad[bad.byteLength - 1] ^= 1;
  const a = store.putEncoded('k', good, good.byteLength);
  const b = store.putEncoded('k', bad, bad.byteLength);
  const [ra, rb] = await Promise.allSettled([a, b]);
  assert.equal(rb.status, 'rejected');
  assert.equal(ra.status, 'fulfilled');
  assert.equal(store.has('k'), true, 'the earlier putEncoded, which succeeded, is not lost');
  assert.equal(await store.get('k'), 'small');
});
