/** An unpack's chunks taken out of the store several reads at a time: in order, exact, and nothing lost on a failed read. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeVerified } from '../../src/codec/decode.js';
import { SizedBufferPool } from '../../src/runtime/sized-buffer-pool.js';
import { TAKE_CONCURRENCY, takeChunks } from '../../src/shuffle/chunk-loans.js';
import { TierReadError } from '../../src/errors.js';
import type { SpillStore } from '../../src/store/spill-store.js';
import { KiB, MiB, openStore } from '../helpers/store.js';

const chunk = (i: number): Uint8Array => Uint8Array.from({ length: 64 * KiB + i * 1000 }, (_, b) => (i * 31 + b) & 0xff);
const pool = (): SizedBufferPool => new SizedBufferPool({ minBytes: 64 * KiB, maxBytes: 1 * MiB, maxSpareBytes: 8 * MiB });

test('chunks spilled and in memory are taken several at a time and come back in key order, byte for byte, and leave the store', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 64 * MiB, pause: false });
  const count = 3 * TAKE_CONCURRENCY + 1;
  const keys = Array.from({ length: count }, (_, i) => `c-${i}`);
  for (const [i, key] of keys.entries()) store.set(key, chunk(i), { owned: true });
  await store.evict(Infinity);
  // A few in memory again, between spilled ones.
  for (const key of ['c-0', 'c-5', `c-${count - 1}`]) store.set(key, chunk(Number(key.slice(2))));
  let inFlight = 0;
  let most = 0;
  const counting: Pick<SpillStore, 'take'> = {
    take: async (key, into) => {
      most = Math.max(most, ++inFlight);
      try {
        return await store.take(key, into);
      } finally {
        inFlight--;
      }
    },
  };
  const loan = await takeChunks(counting, keys, pool());
  assert.equal(most, TAKE_CONCURRENCY, 'several reads at once, never more than the bound');
  assert.equal(loan.chunks.length, count);
  let bytes = 0;
  for (const [i, c] of loan.chunks.entries()) {
    const value = 'encoded' in c ? ((await decodeVerified(c.encoded)) as Uint8Array) : c;
    assert.deepEqual(value, chunk(i), `chunk ${i}`);
    bytes += 'encoded' in c ? c.encoded.byteLength : c.byteLength;
  }
  assert.equal(loan.bytes, bytes);
  assert.ok(loan.lend.length >= count - 3, 'the spilled chunks were read into pooled buffers, lent on');
  assert.equal(store.size, 0);
});

test('a failed read rejects after the reads under way end: buffers back to the pool, keys not taken left in the store', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 64 * MiB, pause: false });
  const count = 2 * TAKE_CONCURRENCY;
  const keys = Array.from({ length: count }, (_, i) => `c-${i}`);
  for (const [i, key] of keys.entries()) store.set(key, chunk(i), { owned: true });
  await store.evict(Infinity);
  // The fourth take fails as a disk read would, after the others have started.
  let takes = 0;
  const failing: Pick<SpillStore, 'take'> = {
    take: async (key, into) => {
      if (++takes !== 4) return store.take(key, into);
      await new Promise((resolve) => setImmediate(resolve));
      throw new TierReadError('disk', key, new Error('EIO: injected'));
    },
  };
  const buffers = pool();
  await assert.rejects(takeChunks(failing, keys, buffers), TierReadError);
  const left = new Set(store.keys());
  assert.ok(left.has('c-3'), 'the chunk whose read failed stays');
  assert.ok(left.size >= count - TAKE_CONCURRENCY, `no read starts after the failure: ${left.size} left`);
  const taken = count - left.size;
  assert.ok(taken >= 3, `the reads under way finished: ${taken} taken`);
  assert.ok(buffers.spareBytes >= taken * 64 * KiB, `every buffer read into went back to the pool: ${buffers.spareBytes} bytes spare for ${taken} chunks`);
  // The keys left read back whole.
  for (const key of left) assert.deepEqual(await store.get(key), chunk(Number(key.slice(2))));
});
