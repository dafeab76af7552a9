import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buffer } from 'node:stream/consumers';
import { ChecksumError, FormatError } from '../../src/index.js';
import { encodeToBuffer } from '../../src/transfer/index.js';
import { KiB, MiB, f64, openStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';

test('createReadStream of an in-memory value yields exactly its encoding, and pins it meanwhile', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  const value = { a: f64(64 * KiB, 1), b: 'text' };
  store.set('k', value);
  const stream = store.createReadStream('k');
  assert.equal(stream.source, 'memory');
  const expected = await encodeToBuffer(value);
  assert.equal(stream.byteLength, expected.byteLength);
  assert.equal(store.stats().pinned.count, 1);
  await store.evict();
  assert.equal(store.where('k'), 'memory', 'a key being streamed is not evicted');
  assert.deepEqual(await buffer(stream), expected);
  await waitFor(() => store.stats().pinned.count === 0, 'unpin');
});

test('createReadStream of a spilled value streams its file without decoding', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  const value = f64(3 * MiB, 2);
  store.set('k', value);
  await store.evict();
  const before = store.stats().counters;
  const stream = store.createReadStream('k');
  assert.equal(stream.source, 'disk');
  const bytes = await buffer(stream);
  assert.deepEqual(bytes, await encodeToBuffer(value));
  assert.equal(stream.byteLength, bytes.byteLength);
  const after = store.stats().counters;
  assert.equal(after.diskReads, before.diskReads, 'no load into memory');
  assert.equal(after.decodeSeconds, before.decodeSeconds, 'nothing decoded');
  assert.equal(store.where('k'), 'disk');
  assert.equal(after.streamedFromTierBytes, bytes.byteLength);
});

test('deleting a key while its file is streamed lets the stream finish, then removes the file', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  store.set('k', f64(2 * MiB, 3));
  await store.evict();
  const stream = store.createReadStream('k');
  store.delete('k');
  assert.equal((await buffer(stream)).byteLength, stream.byteLength);
  await waitFor(() => store.stats().disk.count === 0, 'file removal');
});

test('putEncoded stores received bytes on disk without decoding them', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  const bytes = await encodeToBuffer(f64(1 * MiB, 4));
  await store.putEncoded('k', bytes, bytes.byteLength);
  assert.equal(store.where('k'), 'disk');
  assert.equal(store.stats().counters.decodeSeconds, 0);
  assert.deepEqual(await store.get('k'), f64(1 * MiB, 4));
  // From an async source of batches, too.
  async function* batches(): AsyncGenerator<Uint8Array[]> {
    for (let i = 0; i < bytes.byteLength; i += 100_000) yield [bytes.subarray(i, i + 100_000)];
  }
  await store.putEncoded('k2', batches(), bytes.byteLength);
  assert.deepEqual(await store.get('k2'), f64(1 * MiB, 4));
});

test('putEncoded takes a value whose frame table is larger than 64 KiB (9,000 frames), in pieces of any size', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  const value = Array.from({ length: 9000 }, (_, i) => Uint8Array.of(i & 0xff, 1, 2));
  const bytes = await encodeToBuffer(value);
  await store.putEncoded('whole', bytes, bytes.byteLength);
  assert.deepEqual(await store.get('whole'), value);
  for (const size of [1, 7, 4096]) {
    async function* pieces(): AsyncGenerator<Uint8Array[]> {
      // Many pieces a batch, as a socket delivers them.
      for (let i = 0; i < bytes.byteLength; i += size * 64) {
        const batch: Uint8Array[] = [];
        for (let j = i; j < Math.min(bytes.byteLength, i + size * 64); j += size) batch.push(bytes.subarray(j, Math.min(j + size, bytes.byteLength)));
        yield batch;
      }
    }
    await store.putEncoded(`pieces-${size}`, pieces(), bytes.byteLength);
    assert.deepEqual(await store.get(`pieces-${size}`), value);
  }
});

test('putEncoded with corrupt or truncated bytes stores nothing and rejects', async (t) => {
  const { store, disk } = await openStore(t, { memoryLimit: 10 * MiB });
  const bytes = await encodeToBuffer({ x: f64(64 * KiB, 5) });
  const corrupt = Buffer.from(bytes);
  corrupt[1000] ^= 1;
  await assert.rejects(store.putEncoded('k', corrupt, corrupt.byteLength), ChecksumError);
  await assert.rejects(store.putEncoded('k', bytes.subarray(0, 500), 500), FormatError);
  await assert.rejects(store.putEncoded('k', bytes, bytes.byteLength + 8), FormatError);
  const garbage = Buffer.alloc(64, 7);
  await assert.rejects(store.putEncoded('k', garbage, 64), FormatError);
  assert.equal(store.has('k'), false);
  assert.equal(disk.usage().count, 0);
  store.set('k', 'original');
  await assert.rejects(store.putEncoded('k', corrupt, corrupt.byteLength), ChecksumError);
  assert.equal(await store.get('k'), 'original', 'a failed put leaves the old value');
});
