import assert from 'node:assert/strict';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from '../../src/errors.js';
import { CompressedMemoryTier } from '../../src/tiers/compressed-memory.js';
import { tierContract } from './contract.js';
import { collect, noise, randomWalk, rawSource } from './helpers.js';

const MiB = 1024 * 1024;

tierContract('CompressedMemoryTier', async () => ({
  tier: new CompressedMemoryTier({ capacity: 1024 * MiB }),
  parents: [],
  exactBytes: false,
  cleanup: async () => undefined,
}));

tierContract('CompressedMemoryTier (lz4, 64 KiB chunks)', async () => ({
  tier: new CompressedMemoryTier({ capacity: 1024 * MiB, compression: 'lz4', chunkBytes: 64 * 1024 }),
  parents: [],
  exactBytes: false,
  cleanup: async () => undefined,
}));

describe('CompressedMemoryTier', () => {
  it('rejects a misconfiguration in the constructor', () => {
    for (const capacity of [0, -1, Number.NaN, undefined]) {
      assert.throws(() => new CompressedMemoryTier({ capacity: capacity as number }), InvalidArgumentError);
    }
    assert.throws(() => new CompressedMemoryTier({ capacity: MiB, chunkBytes: 0 }), InvalidArgumentError);
    assert.throws(() => new CompressedMemoryTier({ capacity: MiB, chunkBytes: 64 * MiB }), InvalidArgumentError);
    assert.throws(
      () => new CompressedMemoryTier({ capacity: MiB, compression: 'zstd' as 'lz4' }),
      InvalidArgumentError,
    );
    assert.equal(new CompressedMemoryTier({ capacity: Infinity }).capacity, Infinity);
  });

  it('compresses numeric data, keeps noise raw, and reports it', async () => {
    const tier = new CompressedMemoryTier({ capacity: 256 * MiB });
    await tier.open();
    try {
      const walk = Buffer.from(randomWalk(MiB).buffer); // 8 MiB
      const random = noise(4 * MiB);
      await tier.write(1, rawSource(walk), walk.byteLength);
      await tier.write(2, rawSource(random), random.byteLength);
      const stats = tier.stats();
      assert.equal(stats.details.compressedChunks, 8);
      assert.equal(stats.details.rawChunks, 4);
      assert.ok(stats.bytes < walk.byteLength / 1.5 + random.byteLength, `stored ${stats.bytes}`);
      assert.ok(stats.compressionRatio > 1.3, `ratio ${stats.compressionRatio}`);
      assert.equal(stats.logicalBytes, walk.byteLength + random.byteLength);
      assert.equal(stats.bytesBeforeCompression, walk.byteLength + random.byteLength);
      assert.equal(stats.bytesAfterCompression, stats.bytes);
      assert.ok((await tier.read(1)).every((b, i) => b === walk[i]));
      assert.ok((await collect(tier.createReadStream(2, { start: MiB - 1, end: 2 * MiB + 1 }))).equals(random.subarray(MiB - 1, 2 * MiB + 1)));
      assert.equal(tier.stats().reads, 2);
    } finally {
      await tier.close();
    }
  });

  it('keeps the event loop responsive on 64 MiB values', async () => {
    const tier = new CompressedMemoryTier({ capacity: 1024 * MiB });
    await tier.open();
    const walk = Buffer.from(randomWalk(8 * MiB).buffer); // 64 MiB
    const h = monitorEventLoopDelay({ resolution: 10 });
    h.enable();
    try {
      await tier.write(1, rawSource(walk, 4 * MiB), walk.byteLength);
      const back = await tier.read(1);
      assert.equal(back.byteLength, walk.byteLength);
    } finally {
      h.disable();
      await tier.close();
    }
    // Resolution 10 ms is included in the figure; the target is < 20 ms of real stall.
    assert.ok(h.max / 1e6 < 40, `event loop delay max ${(h.max / 1e6).toFixed(1)} ms`);
  });
});
