/** Byte-size options take a string like '64 MiB' wherever they are options, and refuse a bad one. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CompressedMemoryTier, InvalidArgumentError, SpillStore } from '../../src/index.js';
import { resolveDiskOptions } from '../../src/tiers/disk/options.js';
import { DataClient, FrameTooLargeError, Parser } from '../../src/transfer/index.js';
import { withByteOptions } from '../../src/units.js';

const KiB = 1024;
const MiB = 1024 * KiB;

test('DiskTier and CompressedMemoryTier read their byte sizes from strings', () => {
  const disk = resolveDiskOptions({ capacity: '64 MiB', chunkBytes: '512 KiB', smallValueBytes: '64KiB', segmentBytes: '8 MiB', readSliceBytes: '1 MiB', streamChunkBytes: '256 KiB' });
  assert.deepEqual(
    [disk.capacity, disk.chunkBytes, disk.smallValueBytes, disk.segmentBytes, disk.readSliceBytes, disk.streamChunkBytes],
    [64 * MiB, 512 * KiB, 64 * KiB, 8 * MiB, MiB, 256 * KiB],
  );
  assert.throws(() => resolveDiskOptions({ segmentBytes: 'eight megs' }), InvalidArgumentError);
  const memory = new CompressedMemoryTier({ capacity: '2 MiB', chunkBytes: '256 KiB' });
  assert.equal(memory.capacity, 2 * MiB);
  assert.throws(() => new CompressedMemoryTier({ capacity: '-1 MiB' }), InvalidArgumentError);
});

test("set()'s size, the parser's and the data client's limits read strings", async (t) => {
  const store = await SpillStore.open({ memoryLimit: '64 MiB', monitorIntervalMs: false });
  t.after(() => store.close());
  store.set('k', { small: true }, { size: '3 MiB' });
  assert.equal(store.stats().memory.bytes, 3 * MiB);
  assert.throws(() => store.set('k', 1, { size: 'lots' }), InvalidArgumentError);

  const parser = new Parser({ maxFrameBytes: '1 KiB' });
  const header = Buffer.alloc(5);
  header[0] = 0x20; // a Request frame
  header.writeUInt32LE(2 * KiB, 1);
  assert.throws(() => parser.parse(header, () => undefined), FrameTooLargeError);

  assert.deepEqual(withByteOptions({ batchBytes: '2 MiB', busyRetries: 3 }, ['batchBytes'] as const), { batchBytes: 2 * MiB, busyRetries: 3 });
  assert.throws(() => new DataClient({ diskQueueBytes: '8 parsecs' }), InvalidArgumentError);
});
