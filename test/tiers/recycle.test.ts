import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type DiskTier, type RecyclingStream } from '../../src/tiers/index.js';
import { encode, encodedBatches, type Encoded } from '../../src/codec/index.js';
import { openDiskTier } from './helpers.js';

/** Writes `value` under `id`; returns its encoded bytes, as a read must give them back. */
async function writeValue(tier: DiskTier, id: number, value: Float64Array): Promise<Buffer> {
  const encoded: Encoded = encode(value);
  await tier.write(id, encodedBatches(encoded), encoded.byteLength);
  const parts: Uint8Array[] = [];
  for await (const batch of encodedBatches(encoded)) parts.push(...batch);
  return Buffer.concat(parts);
}

/** Reads a stream, handing every chunk back once copied; notes the memory each chunk used. */
async function readRecycling(stream: RecyclingStream, memories: Set<ArrayBufferLike>): Promise<Buffer> {
  const received: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    received.push(Buffer.from(chunk)); // copy first: the chunk goes back for reuse
    memories.add(chunk.buffer);
    stream.recycle(chunk);
  }
  return Buffer.concat(received);
}

test('a disk read stream reads into chunks its consumer hands back, and the bytes stay right', async (t) => {
  const tier = await openDiskTier(t, { streamChunkBytes: 64 * 1024, smallValueBytes: 0 });
  const expected = await writeValue(tier, 1, new Float64Array(100_000).map((_, i) => i));
  const stream = tier.createReadStream(1) as RecyclingStream;
  assert.equal(typeof stream.recycle, 'function');
  const memories = new Set<ArrayBufferLike>();
  assert.deepEqual(await readRecycling(stream, memories), expected);
  const chunks = Math.ceil(expected.byteLength / (64 * 1024));
  assert.ok(memories.size < chunks, `${memories.size} buffers for ${chunks} chunks`);
});

test('serving many small values reuses a few buffers across streams, and every value comes back right', async (t) => {
  // Small values live in segments; each stream used to allocate a whole stream chunk.
  const tier = await openDiskTier(t, { streamChunkBytes: 256 * 1024 });
  const expected: Buffer[] = [];
  for (let id = 1; id <= 50; id++) expected.push(await writeValue(tier, id, new Float64Array(1000).fill(id)));
  const memories = new Set<ArrayBufferLike>();
  for (let id = 1; id <= 50; id++) {
    const bytes = await readRecycling(tier.createReadStream(id) as RecyclingStream, memories);
    assert.deepEqual(bytes, expected[id - 1], `value ${id}`);
  }
  assert.equal(memories.size, 1, `${memories.size} buffers for 50 sequential streams`);
});

test('a stream whose consumer keeps its chunks never sees them overwritten by a later stream', async (t) => {
  const tier = await openDiskTier(t, { streamChunkBytes: 64 * 1024 });
  for (let id = 1; id <= 5; id++) await writeValue(tier, id, new Float64Array(500).fill(id));
  const kept: Buffer[] = [];
  for (let id = 1; id <= 5; id++) {
    for await (const chunk of tier.createReadStream(id) as AsyncIterable<Buffer>) kept.push(chunk);
  }
  const buffers = new Set(kept.map((c) => c.buffer));
  assert.equal(buffers.size, kept.length, 'chunks that were not handed back are never lent again');
});
