import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { test } from 'node:test';
import { decodeVerified } from '../../src/codec/decode.js';
import { encodeToBuffer } from '../../src/codec/encode.js';
import { SizedBufferPool } from '../../src/runtime/sized-buffer-pool.js';
import { TierReadError } from '../../src/errors.js';
import { DiskTier, TierWrapper, type ByteRange } from '../../src/tiers/index.js';
import { KiB, MiB, filesUnder, openStore } from '../helpers/store.js';

function bytesOf(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = (seed * 31 + i * 7) & 0xff;
  return out;
}

test('take hands a value in memory over as it is and forgets the key', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 16 * MiB });
  const value = bytesOf(100 * KiB, 1);
  store.set('k', value);
  const taken = await store.take('k', () => assert.fail('nothing to read'));
  assert.deepEqual(taken, { value, alone: true });
  assert.equal(store.has('k'), false);
  await assert.rejects(store.get('k'), { code: 'SPW_ERR_KEY_NOT_FOUND' });
  store.set('p', value);
  const lease = await store.acquire(['p']);
  assert.deepEqual(await store.take('p', () => assert.fail('nothing to read')), { value, alone: false }, 'a leased value is not the taker\'s alone');
  lease.release();
  await assert.rejects(store.take('nope', () => new Uint8Array(0)), { code: 'SPW_ERR_KEY_NOT_FOUND' });
});

test('a spilled value is read into the taker\'s buffers, which keep exact bytes while reused, and nothing brings a taken key back', async (t) => {
  const { store, dir } = await openStore(t, { memoryLimit: 16 * MiB });
  const pool = new SizedBufferPool({ minBytes: 64 * KiB, maxBytes: 4 * MiB, maxSpareBytes: 8 * MiB });
  const sizes = [300 * KiB, 290 * KiB, 310 * KiB, 20 * KiB];
  // Stored straight below memory: no value of them is alive anywhere (the store would hand that over).
  for (const [i, n] of sizes.entries()) {
    const encoded = await encodeToBuffer(bytesOf(n, i));
    await store.putEncoded(`k${i}`, encoded, encoded.byteLength);
  }
  assert.deepEqual(sizes.map((_, i) => store.where(`k${i}`)), sizes.map(() => 'disk'));
  let last: ArrayBufferLike | undefined;
  for (const [i, n] of sizes.entries()) {
    const taken = await store.take(`k${i}`, (bytes) => pool.take(bytes));
    assert.ok('encoded' in taken);
    if (i === 1) assert.equal(taken.encoded.buffer, last, 'the buffer given back was reused');
    const value = (await decodeVerified(taken.encoded)) as Uint8Array;
    assert.equal(value.buffer, taken.encoded.buffer, 'decoded in place');
    assert.deepEqual(value, bytesOf(n, i));
    assert.equal(store.has(`k${i}`), false);
    await assert.rejects(store.get(`k${i}`), { code: 'SPW_ERR_KEY_NOT_FOUND' });
    last = taken.encoded.buffer;
    pool.give(taken.encoded.buffer);
  }
  await store.flush();
  assert.deepEqual(await filesUnder(dir).then((files) => files.filter((f) => f.endsWith('.spw'))), [], 'their copies are deleted');
});

test('take of a value being spilled waits for the write, then the key is gone for good', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 16 * MiB });
  const value = bytesOf(2 * MiB, 9);
  // A value dropped after its spill but still alive comes back as it is, not read.
  const dropped = bytesOf(1 * MiB, 3);
  store.set('d', dropped);
  await store.evict();
  assert.equal(store.where('d'), 'disk');
  assert.deepEqual(await store.take('d', () => assert.fail('alive: nothing to read')), { value: dropped, alone: true });
  assert.equal(store.stats().detached.count, 0, 'no weak reference left');
  store.set('w', value);
  const evicting = store.evict();
  const taken = await store.take('w', () => assert.fail('in memory: nothing to read'));
  assert.deepEqual(taken, { value, alone: true });
  await evicting;
  await store.flush();
  assert.equal(store.has('w'), false);
  assert.deepEqual([...store.keys()], []);
});

/** Counts the takes read in place. */
class CountingInPlace extends TierWrapper {
  inPlace = 0;
  override readonly readInto = async (id: number, out: Uint8Array): Promise<void> => {
    this.inPlace++;
    await this.inner.readInto?.(id, out);
  };
}

/** Counts the tier's reads through its stream. */
class CountingReads extends TierWrapper {
  streams = 0;
  override createReadStream(id: number, range?: ByteRange): Readable {
    this.streams++;
    return this.inner.createReadStream(id, range);
  }
}

test('a spilled value is read in place where the tier can, through its stream where it cannot, the same bytes either way', async (t) => {
  const sizes = [300 * KiB, 20 * KiB, 2 * MiB + 5];
  for (const way of ['in place', 'stream'] as const) {
    let counting: CountingInPlace | undefined;
    let streaming: CountingReads | undefined;
    const { store } = await openStore(t, {
      memoryLimit: 16 * MiB,
      wrap: (disk) => {
        if (way === 'stream') return (streaming = new CountingReads(disk));
        assert.equal(typeof new TierWrapper(disk).readInto, 'function', 'a wrapper that changes no read passes readInto on');
        return (counting = new CountingInPlace(disk));
      },
    });
    for (const [i, n] of sizes.entries()) {
      const encoded = await encodeToBuffer(bytesOf(n, i));
      await store.putEncoded(`k${i}`, encoded, encoded.byteLength);
    }
    for (const [i, n] of sizes.entries()) {
      const taken = await store.take(`k${i}`, (bytes) => new Uint8Array(bytes));
      assert.ok('encoded' in taken);
      assert.deepEqual(await decodeVerified(taken.encoded), bytesOf(n, i), `${way}: value ${i}`);
    }
    if (way === 'in place') assert.equal(counting?.inPlace, sizes.length, 'every take read in place');
    else assert.equal(streaming?.streams, sizes.length, 'every take read through the stream');
  }
  assert.equal(new CountingReads(new DiskTier({ directory: '/nonexistent' })).readInto, undefined, 'a wrapper that overrides a read method hides readInto');
});

test('a read that fails in place leaves the key in the store and rejects with TierReadError', async (t) => {
  const { store, dir } = await openStore(t, { memoryLimit: 16 * MiB });
  const encoded = await encodeToBuffer(bytesOf(1 * MiB, 4));
  await store.putEncoded('k', encoded, encoded.byteLength);
  assert.equal(store.where('k'), 'disk');
  // A disk that lost the value's bytes: its file cut short.
  for (const file of (await filesUnder(dir)).filter((f) => f.endsWith('.spw'))) await fsp.truncate(file, 100);
  await assert.rejects(store.take('k', (bytes) => new Uint8Array(bytes)), TierReadError);
  assert.equal(store.has('k'), true, 'not taken: the key stays where it was');
  assert.equal(store.where('k'), 'disk');
});
