import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DiskTier, type RecyclingStream } from '../../src/tiers/index.js';
import { encode, encodedBatches } from '../../src/codec/index.js';
import { tempDir } from '../helpers/store.js';

test('a disk read stream reads into chunks its consumer hands back, and the bytes stay right', async (t) => {
  const tier = new DiskTier({ directory: await tempDir(t), streamChunkBytes: 64 * 1024, smallValueBytes: 0 });
  await tier.open();
  t.after(() => tier.close());
  const value = new Float64Array(100_000).map((_, i) => i);
  const encoded = encode(value);
  await tier.write(1, encodedBatches(encoded), encoded.byteLength);
  const parts: Uint8Array[] = [];
  for await (const batch of encodedBatches(encoded)) parts.push(...batch);
  const expected = Buffer.concat(parts);

  const stream = tier.createReadStream(1) as RecyclingStream;
  assert.equal(typeof stream.recycle, 'function');
  const memories = new Set<ArrayBufferLike>();
  const received: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    received.push(Buffer.from(chunk)); // copy first: the chunk goes back for reuse
    memories.add(chunk.buffer);
    stream.recycle(chunk);
  }
  assert.deepEqual(Buffer.concat(received), expected);
  const chunks = Math.ceil(expected.byteLength / (64 * 1024));
  assert.ok(memories.size < chunks, `${memories.size} buffers for ${chunks} chunks`);
});

test('serving many small values reuses a few buffers across streams, and every value comes back right', async (t) => {
  // Small values live in segments; each stream used to allocate a whole stream chunk.
  const tier = new DiskTier({ directory: await tempDir(t), streamChunkBytes: 256 * 1024 });
  await tier.open();
  t.after(() => tier.close());
  const expected: Buffer[] = [];
  for (let id = 1; id <= 50; id++) {
    const encoded = encode(new Float64Array(1000).fill(id));
    await tier.write(id, encodedBatches(encoded), encoded.byteLength);
    const parts: Uint8Array[] = [];
    for await (const batch of encodedBatches(encoded)) parts.push(...batch);
    expected.push(Buffer.concat(parts));
  }
  const memories = new Set<ArrayBufferLike>();
  for (let id = 1; id <= 50; id++) {
    const stream = tier.createReadStream(id) as RecyclingStream;
    const received: Buffer[] = [];
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      received.push(Buffer.from(chunk));
      memories.add(chunk.buffer);
      stream.recycle(chunk);
    }
    assert.deepEqual(Buffer.concat(received), expected[id - 1], `value ${id}`);
  }
  assert.equal(memories.size, 1, `${memories.size} buffers for 50 sequential streams`);
});

test('a stream whose consumer keeps its chunks never sees them overwritten by a later stream', async (t) => {
  const tier = new DiskTier({ directory: await tempDir(t), streamChunkBytes: 64 * 1024 });
  await tier.open();
  t.after(() => tier.close());
  const kept: Buffer[] = [];
  for (let id = 1; id <= 5; id++) {
    const encoded = encode(new Float64Array(500).fill(id));
    await tier.write(id, encodedBatches(encoded), encoded.byteLength);
  }
  for (let id = 1; id <= 5; id++) {
    for await (const chunk of tier.createReadStream(id) as AsyncIterable<Buffer>) kept.push(chunk);
  }
  const buffers = new Set(kept.map((c) => c.buffer));
  assert.equal(buffers.size, kept.length, 'chunks that were not handed back are never lent again');
});
