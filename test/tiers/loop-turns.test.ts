/**
 * writeMany gives the event loop turns while it compresses and copies. Checked through the
 * loop turn in which each item's pieces are last read (deterministic, unlike a stall timed
 * on a shared machine). Before: every item of a batch of 2,048 values was compressed in
 * the turn the call started in (20-38 ms for the store's own batches of 4 MiB here, 245 ms
 * for 1,024 values of 60 KiB), and CompressedMemoryTier copied a 64 MiB item in one go
 * (~60 ms).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CompressedMemoryTier } from '../../src/tiers/compressed-memory.js';
import type { WriteItem, WriteResults } from '../../src/tiers/tier.js';
import { openDiskTier, randomWalk } from './helpers.js';

const KiB = 1024;
const MiB = 1024 * KiB;

/** Runs `run` while counting loop turns; `watch` makes pieces that record the turn they were last read in. */
async function withTurns(run: (watch: (piece: Uint8Array) => Uint8Array[]) => Promise<WriteResults>): Promise<{ results: WriteResults; lastRead: number[] }> {
  let turn = 0;
  let spinning = true;
  const spin = (): void => {
    turn++;
    if (spinning) setImmediate(spin);
  };
  setImmediate(spin);
  const lastRead: number[] = [];
  const watch = (piece: Uint8Array): Uint8Array[] => {
    const k = lastRead.push(0) - 1;
    const pieces: Uint8Array[] = [];
    Object.defineProperty(pieces, 0, { enumerable: true, get: () => ((lastRead[k] = turn), piece) });
    return pieces;
  };
  try {
    return { results: await run(watch), lastRead };
  } finally {
    spinning = false;
  }
}

describe('writeMany gives the event loop turns', () => {
  it('DiskTier with lz4: a batch of 2,048 compressible 4 KiB values is not all compressed in one loop turn', async (t) => {
    const tier = await openDiskTier(t, { compression: 'lz4' });
    const walk = Buffer.from(randomWalk(MiB).buffer); // 8 MiB
    let items: WriteItem[] = [];
    const { results, lastRead } = await withTurns((watch) => {
      items = Array.from({ length: 2048 }, (_, i) => ({ id: i, bytes: watch(walk.subarray(i * 4 * KiB, (i + 1) * 4 * KiB)), byteLength: 4 * KiB }));
      return tier.writeMany!(items);
    });
    assert.ok(results.every((r) => r.status === 'fulfilled'));
    assert.ok(Math.max(...lastRead) > 0, 'every value was compressed in the loop turn of the call: the loop was held throughout');
    for (const i of [0, 1000, 2047]) assert.ok(Buffer.from(await tier.read(i)).equals(walk.subarray(i * 4 * KiB, (i + 1) * 4 * KiB)));
  });

  it('CompressedMemoryTier: writeMany copies a 64 MiB item chunk by chunk, with loop turns, not all at once', async () => {
    const tier = new CompressedMemoryTier({ capacity: 1024 * MiB });
    await tier.open();
    try {
      const walk = Buffer.from(randomWalk(8 * MiB).buffer); // 64 MiB, given as 64 pieces of 1 MiB
      const { results, lastRead } = await withTurns((watch) => {
        // One item whose pieces are 64 watched views of 1 MiB.
        const itemPieces: Uint8Array[] = [];
        for (let k = 0; k < 64; k++) {
          const watched = watch(walk.subarray(k * MiB, (k + 1) * MiB));
          Object.defineProperty(itemPieces, k, { enumerable: true, get: () => watched[0] });
        }
        return tier.writeMany([{ id: 1, bytes: itemPieces, byteLength: walk.byteLength }]);
      });
      assert.equal(results[0].status, 'fulfilled');
      assert.ok(Math.max(...lastRead) > 0, 'all 64 MiB were copied in the loop turn of the call');
      assert.ok(Buffer.from(await tier.read(1)).equals(walk));
    } finally {
      await tier.close();
    }
  });
});
