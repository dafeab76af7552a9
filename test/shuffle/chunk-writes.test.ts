import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeVerified } from '../../src/codec/decode.js';
import { SizedBufferPool } from '../../src/runtime/sized-buffer-pool.js';
import { ShuffleReceiver } from '../../src/shuffle/receiver.js';
import { parseRecords } from '../../src/shuffle/records.js';
import { FaultyTier } from '../../src/testing/fault-tiers.js';
import type { WriteItem, WriteResults, WriteSource } from '../../src/tiers/tier.js';
import { TierWrapper } from '../../src/tiers/wrappers.js';
import type { SpillStore } from '../../src/store/spill-store.js';
import { recordFrame as frame } from '../helpers/shuffle-records.js';
import { KiB, MiB, openStore } from '../helpers/store.js';

const PAYLOAD = 60 * KiB;

/**
 * Takes the chunks under `keys` out of the store into pooled buffers, as an unpack does,
 * checking that they hold output `output` of every input byte for byte, and giving each
 * buffer back before the next take.
 */
async function takeOutput(store: SpillStore, pool: SizedBufferPool, output: number, keys: readonly string[], inputs: number, payload = PAYLOAD): Promise<void> {
  const seen: number[] = [];
  for (const key of keys) {
    const taken = await store.take(key, (n) => pool.take(n));
    const chunk = ('encoded' in taken ? await decodeVerified(taken.encoded) : taken.value) as Uint8Array;
    for (const record of parseRecords(chunk)) {
      assert.equal(record.output, output);
      seen.push(record.input);
      assert.equal(record.payload.byteLength, payload);
      for (let b = 0; b < payload; b += 997) assert.equal(record.payload[b], (record.input * 7 + output * 13 + b) & 0xff, `output ${output} input ${record.input} byte ${b}`);
    }
    pool.give('encoded' in taken ? taken.encoded.buffer : chunk.buffer);
  }
  assert.deepEqual(seen.sort((a, b) => a - b), Array.from({ length: inputs }, (_, i) => i));
}

/** Pins a value over the store's target, so that every chunk is written through; release the lease to unpin it. */
async function overTarget(store: SpillStore): Promise<{ release(): void }> {
  store.set('filler', new Uint8Array(1 * MiB));
  return await store.acquire(['filler']);
}

/** Takes each output of the receiver's shuffle 's' and checks it (takeOutput). */
async function takeAll(store: SpillStore, receiver: ShuffleReceiver, pool: SizedBufferPool, outputs: number, inputs: number): Promise<void> {
  for (let output = 0; output < outputs; output++) {
    const { keys } = receiver.take('s', output) ?? { keys: [] };
    await receiver.written(keys);
    await takeOutput(store, pool, output, keys, inputs);
  }
}

test('chunks of a store at its target are written through from the pieces where they arrived, with no buffer of the pool, bytes exact', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 1 * MiB, pause: false });
  const lease = await overTarget(store);
  const pool = new SizedBufferPool({ minBytes: 64 * KiB, maxBytes: 4 * MiB, maxSpareBytes: 4 * MiB });
  const receiver = new ShuffleReceiver(store, { bufferBytes: 512 * KiB, chunkBytes: 256 * KiB, pool });
  const inputs = 12;
  for (let input = 0; input < inputs; input++) await receiver.accept({ id: 's', run: 1, input, seq: 0, data: [frame(input, [0, 1, 2], PAYLOAD)] });
  assert.deepEqual({ allocated: pool.allocated, reused: pool.reused }, { allocated: 0, reused: 0 }, 'no chunk was laid out in a buffer');
  lease.release();
  store.delete('filler');
  await takeAll(store, receiver, pool, 3, inputs);
  assert.ok(pool.reused > 0, 'the buffers reads go into are reused');
  assert.equal(store.size, 0);
  assert.equal(receiver.bufferedBytes, 0);
});

test('small records are laid out in a pooled buffer and written through from it, which goes back to the pool, bytes exact', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 1 * MiB, pause: false });
  const lease = await overTarget(store);
  const pool = new SizedBufferPool({ minBytes: 64 * KiB, maxBytes: 4 * MiB, maxSpareBytes: 4 * MiB });
  const receiver = new ShuffleReceiver(store, { bufferBytes: 512 * KiB, chunkBytes: 64 * KiB, pool });
  const inputs = 100;
  const payload = 2000;
  const released: number[] = [];
  const frames = Array.from({ length: inputs }, (_, input) => frame(input, [0, 1, 2], payload));
  for (const [input, data] of frames.entries()) await receiver.accept({ id: 's', run: 1, input, seq: 0, data: [data], released: () => released.push(input) });
  const taken = [0, 1, 2].map((output) => receiver.take('s', output)?.keys ?? []);
  assert.ok(taken.every((keys) => keys.length >= 3), 'each output was written in several chunks');
  assert.equal(released.length, inputs, 'every frame was let go once its records were copied');
  for (const f of frames) f.fill(0xee);
  await receiver.written(taken.flat());
  assert.ok(pool.allocated > 0 && pool.spareBytes > 0, `the chunks were laid out in buffers that came back once written: ${JSON.stringify({ allocated: pool.allocated, spare: pool.spareBytes })}`);
  lease.release();
  store.delete('filler');
  const before = pool.reused;
  for (const [output, keys] of taken.entries()) await takeOutput(store, pool, output, keys, inputs, payload);
  assert.ok(pool.reused > before, 'the takes reuse them');
  assert.equal(store.size, 0);
});

/** A disk whose writes wait until `open()`: the writes under way hold the pieces they read. */
class GatedTier extends TierWrapper {
  #open!: () => void;
  readonly #gate = new Promise<void>((resolve) => (this.#open = resolve));
  writes = 0;
  letWritesThrough(): void {
    this.#open();
  }
  override async write(id: number, source: WriteSource, byteLength: number): Promise<void> {
    this.writes++;
    await this.#gate;
    return this.inner.write(id, source, byteLength);
  }
  protected override async writeBatch(items: readonly WriteItem[]): Promise<WriteResults> {
    this.writes++;
    await this.#gate;
    return super.writeBatch(items);
  }
}

test('a pushed frame is released only once the chunks written from it have landed, and they keep exact bytes after it is reused', async (t) => {
  let gated: GatedTier | undefined;
  const { store } = await openStore(t, { memoryLimit: 1 * MiB, pause: false, wrap: (disk) => (gated = new GatedTier(disk)) });
  const lease = await overTarget(store);
  const pool = new SizedBufferPool({ minBytes: 64 * KiB, maxBytes: 4 * MiB, maxSpareBytes: 4 * MiB });
  const receiver = new ShuffleReceiver(store, { bufferBytes: 4 * MiB, chunkBytes: 2 * PAYLOAD, pool });
  const released: number[] = [];
  const frames = [0, 1].map((input) => frame(input, [0, 1], PAYLOAD));
  // Each output passes chunkBytes with the second frame: both outputs are written through then.
  for (const [input, data] of frames.entries()) await receiver.accept({ id: 's', run: 1, input, seq: 0, data: [data], released: () => released.push(input) });
  const taken = [0, 1].map((output) => receiver.take('s', output)?.keys ?? []);
  assert.equal(taken.flat().length, 2);
  for (let i = 0; i < 20 && gated!.writes === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
  assert.ok(gated!.writes > 0, 'the chunks are being written');
  assert.deepEqual(released, [], 'the writes under way still read the frames');
  gated!.letWritesThrough();
  await receiver.written(taken.flat());
  assert.deepEqual(released.sort(), [0, 1]);
  // The sender reuses its frames now: what was written must not see it.
  for (const f of frames) f.fill(0xee);
  assert.equal(pool.allocated, 0, 'no chunk was laid out in a buffer');
  lease.release();
  for (const [output, keys] of taken.entries()) await takeOutput(store, pool, output, keys, 2);
});

test('a chunk whose write through fails is kept by the store as a value, bytes exact', async (t) => {
  let failing = true;
  let faulty: FaultyTier | undefined;
  const { store } = await openStore(t, { memoryLimit: 1 * MiB, pause: false, wrap: (disk) => (faulty = new FaultyTier(disk, { failWrite: () => (failing ? 'EIO' : undefined) })) });
  store.on('error', () => undefined);
  const lease = await overTarget(store);
  const pool = new SizedBufferPool({ minBytes: 64 * KiB, maxBytes: 4 * MiB, maxSpareBytes: 4 * MiB });
  const receiver = new ShuffleReceiver(store, { bufferBytes: 4 * MiB, chunkBytes: 128 * KiB, pool });
  const frames = [0, 1, 2, 3].map((input) => frame(input, [0, 1], PAYLOAD));
  let released = 0;
  for (const [input, data] of frames.entries()) await receiver.accept({ id: 's', run: 1, input, seq: 0, data: [data], released: () => released++ });
  await store.flush();
  assert.ok((faulty?.writeFailures ?? 0) > 0, 'writes through failed');
  const taken = [0, 1].map((output) => receiver.take('s', output)?.keys ?? []);
  await receiver.written(taken.flat());
  assert.equal(released, 4, 'the chunks that failed to be written were copied, and the frames let go');
  // The sender reuses its frames: the copies the store holds must not see it.
  for (const f of frames) f.fill(0xee);
  failing = false;
  lease.release();
  store.delete('filler');
  for (const [output, keys] of taken.entries()) await takeOutput(store, pool, output, keys, 4);
});
