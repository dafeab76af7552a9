import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeVerified } from '../../src/codec/decode.js';
import { SizedBufferPool } from '../../src/runtime/sized-buffer-pool.js';
import { ShuffleReceiver } from '../../src/shuffle/receiver.js';
import { parseRecords } from '../../src/shuffle/records.js';
import { FaultyTier } from '../../src/testing/fault-tiers.js';
import type { SpillStore } from '../../src/store/spill-store.js';
import { recordFrame as frame } from '../helpers/shuffle-records.js';
import { KiB, MiB, openStore } from '../helpers/store.js';

const PAYLOAD = 60 * KiB;

/**
 * Takes every chunk of each output out of the store into pooled buffers, as an unpack
 * does, checking each record byte for byte, giving each buffer back before the next take.
 */
async function takeAll(store: SpillStore, receiver: ShuffleReceiver, pool: SizedBufferPool, outputs: number, inputs: number): Promise<void> {
  for (let output = 0; output < outputs; output++) {
    const { keys } = receiver.take('s', output) ?? { keys: [] };
    await receiver.written(keys);
    const seen: number[] = [];
    for (const key of keys) {
      const taken = await store.take(key, (n) => pool.take(n));
      const chunk = ('encoded' in taken ? await decodeVerified(taken.encoded) : taken.value) as Uint8Array;
      for (const record of parseRecords(chunk)) {
        assert.equal(record.output, output);
        seen.push(record.input);
        for (let b = 0; b < PAYLOAD; b += 997) assert.equal(record.payload[b], (record.input * 7 + output * 13 + b) & 0xff, `output ${output} input ${record.input} byte ${b}`);
      }
      pool.give('encoded' in taken ? taken.encoded.buffer : chunk.buffer);
    }
    assert.deepEqual(seen.sort((a, b) => a - b), Array.from({ length: inputs }, (_, i) => i));
  }
}

test('chunks of a store at its target are written through from pooled buffers, which come back and are reused with exact bytes', async (t) => {
  // A target far under one chunk: every chunk is written through.
  const { store } = await openStore(t, { memoryLimit: 1 * MiB });
  const pool = new SizedBufferPool({ minBytes: 64 * KiB, maxBytes: 4 * MiB, maxSpareBytes: 4 * MiB });
  const receiver = new ShuffleReceiver(store, { bufferBytes: 512 * KiB, chunkBytes: 256 * KiB, pool });
  const inputs = 12;
  for (let input = 0; input < inputs; input++) await receiver.accept({ id: 's', run: 1, input, seq: 0, data: [frame(input, [0, 1, 2], PAYLOAD)] });
  const before = { reused: pool.reused, allocated: pool.allocated };
  assert.ok(before.reused > 0, 'buffers written through came back and were reused for later chunks');
  assert.ok(before.allocated <= 8, `at most the budget's worth of buffers allocated, got ${before.allocated}`);
  await takeAll(store, receiver, pool, 3, inputs);
  assert.ok(pool.reused > before.reused, 'the buffers reads go into are reused too');
  assert.equal(store.size, 0);
  assert.equal(receiver.bufferedBytes, 0);
});

test('a chunk whose write through fails is kept by the store as a value, bytes exact', async (t) => {
  let failing = true;
  let faulty: FaultyTier | undefined;
  const { store } = await openStore(t, { memoryLimit: 1 * MiB, pause: false, wrap: (disk) => (faulty = new FaultyTier(disk, { failWrite: () => (failing ? 'EIO' : undefined) })) });
  store.on('error', () => undefined);
  // Pinned over the target: every chunk is written through.
  store.set('filler', new Uint8Array(1 * MiB));
  const lease = await store.acquire(['filler']);
  const pool = new SizedBufferPool({ minBytes: 64 * KiB, maxBytes: 4 * MiB, maxSpareBytes: 4 * MiB });
  const receiver = new ShuffleReceiver(store, { bufferBytes: 4 * MiB, chunkBytes: 128 * KiB, pool });
  for (let input = 0; input < 4; input++) await receiver.accept({ id: 's', run: 1, input, seq: 0, data: [frame(input, [0, 1], PAYLOAD)] });
  await store.flush();
  assert.ok((faulty?.writeFailures ?? 0) > 0, 'writes through failed');
  failing = false;
  lease.release();
  store.delete('filler');
  await takeAll(store, receiver, pool, 2, 4);
});
