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
