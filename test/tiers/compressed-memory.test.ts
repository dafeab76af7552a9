import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from '../../src/errors.js';
import { CompressedMemoryTier } from '../../src/tiers/compressed-memory.js';
import { tierContract } from '../../src/testing/index.js';
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

  it('gives the event loop a turn for every chunk of a 64 MiB value', async () => {
    const tier = new CompressedMemoryTier({ capacity: 1024 * MiB });
    await tier.open();
    const walk = Buffer.from(randomWalk(8 * MiB).buffer); // 64 MiB = 64 chunks of 1 MiB
    // Counts loop turns: a turn that never comes means some call held the loop.
    let turns = 0;
    let spinning = true;
    const spin = (): void => {
      if (!spinning) return;
      turns++;
      setImmediate(spin);
    };
    setImmediate(spin);
    try {
      await tier.write(1, rawSource(walk, 4 * MiB), walk.byteLength);
      const writeTurns = turns;
      const back = await tier.read(1);
      const readTurns = turns - writeTurns;
      assert.ok(Buffer.from(back).equals(walk));
      assert.ok(writeTurns >= 64, `${writeTurns} loop turns while writing 64 chunks`);
      assert.ok(readTurns >= 63, `${readTurns} loop turns while reading 64 chunks`);
    } finally {
      spinning = false;
      await tier.close();
    }
  });

  it('keeps no view of the source: a source that reuses its memory after the write does not change the value', async () => {
    const tier = new CompressedMemoryTier({ capacity: 256 * MiB, compression: 'auto' });
    await tier.open();
    try {
      // Noise stays raw (incompressible), numbers get compressed; both in 1 MiB chunks that
      // lie inside the source's 4 MiB pieces, so the tier sees views of them.
      const random = noise(4 * MiB + 100);
      const walk = Buffer.from(randomWalk(MiB).buffer);
      const expected = [Buffer.from(random), Buffer.from(walk)];
      await tier.write(1, rawSource(random, 4 * MiB), random.byteLength);
      await tier.write(2, rawSource(walk, 4 * MiB), walk.byteLength);
      assert.equal(tier.stats().details.rawChunks, 5);
      random.fill(0);
      walk.fill(0);
      assert.ok(Buffer.from(await tier.read(1)).equals(expected[0]), 'raw chunks are copies');
      assert.ok(Buffer.from(await tier.read(2)).equals(expected[1]));
    } finally {
      await tier.close();
    }
  });
});
