/**
 * A segment of tiny values lists hundreds of thousands of ids, and pruning its list or
 * compacting it walks them all: the walk gives the event loop turns. Checked through the
 * lookups (Placements.slotOf) made in each loop turn, not by timing (a shared machine).
 * Before: a prune of 1M members held the loop for ~0.4 s, a compaction for 0.1-0.8 s a step
 * (its list and sort in one step, then windows of 30,000+ moves).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DiskTier, type DiskTierOptions } from '../../src/tiers/disk/disk-tier.js';
import { Placements } from '../../src/tiers/disk/placements.js';
import { SegmentStore } from '../../src/tiers/disk/segment-store.js';
import { onCleanup, withCleanup } from '../helpers/cleanup.js';
import { tempDir } from './helpers.js';

/** Members in the segment: a walk of them all in one turn makes this many lookups at least. */
const N = 1 << 18;
/** Lookups allowed in one loop turn: a slice of the walk (32,768), the moves of a window, and slack. */
const PER_TURN = N / 4;

/**
 * Counts Placements.slotOf calls per loop turn while `run` runs. Patches the prototype (a
 * test seam: the tier makes its own placements); puts it back after.
 */
async function lookupsPerTurn(run: () => Promise<void>): Promise<number[]> {
  const counts = [0];
  let spinning = true;
  const spin = (): void => {
    counts.push(0);
    if (spinning) setImmediate(spin);
  };
  setImmediate(spin);
  const { slotOf } = Placements.prototype;
  Placements.prototype.slotOf = function (this: Placements, id: number): number {
    counts[counts.length - 1]++;
    return slotOf.call(this, id);
  };
  try {
    await run();
  } finally {
    spinning = false;
    Placements.prototype.slotOf = slotOf;
  }
  return counts;
}

/** A tier holding N values of 8 bytes (ids 0 to N - 1) in its first segment (one lane: every write goes there). */
async function withTinyValues(options: DiskTierOptions, body: (tier: DiskTier) => Promise<void>): Promise<void> {
  await withCleanup(async (scope) => {
    const tier = new DiskTier({ directory: await tempDir(scope), segmentLanes: 1, ...options });
    await tier.open();
    onCleanup(scope, () => tier.close());
    const bytes = new Uint8Array(8).fill(7);
    for (let from = 0; from < N; from += 4096) {
      const items = Array.from({ length: 4096 }, (_, i) => ({ id: from + i, bytes: [bytes], byteLength: 8 }));
      const results = await tier.writeMany!(items);
      assert.ok(results.every((r) => r.status === 'fulfilled'));
    }
    assert.equal(tier.segmentFiles()[0].records, N);
    await body(tier);
  });
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('a segment of very many members gives the event loop turns', () => {
  it('a prune of its list of members walks it over several loop turns', async () => {
    await withTinyValues({ compactDeadFraction: 0.99 }, async (tier) => {
      // Half dead: not pruned yet (the dead ones must outnumber the live ones).
      for (let id = 0; id < N / 2; id++) await tier.delete(id);
      assert.equal(tier.segmentFiles()[0].records, N);
      let turns = 0;
      const counts = await lookupsPerTurn(async () => {
        await tier.delete(N / 2);
        for (; tier.segmentFiles()[0].records === N && turns < 10_000; turns++) await nextTurn();
      });
      const [seg] = tier.segmentFiles();
      assert.equal(seg.liveValues, N / 2 - 1);
      assert.equal(seg.records, N / 2 - 1, 'pruned down to the live values');
      assert.ok(turns >= 2, `the prune ended ${turns} turns after the delete that started it`);
      assert.ok(counts.every((c) => c <= PER_TURN), `lookups per turn: ${counts.filter((c) => c > 0).join(', ')}`);
      for (const id of [N / 2 + 1, N - 1]) assert.deepEqual([...(await tier.read(id))], new Array(8).fill(7));
    });
  });

  it('a compaction lists, sorts and moves its live values over many loop turns', async () => {
    // The segment is full at N values; the value after them seals it.
    await withTinyValues({ segmentBytes: 8 * N, compactDeadFraction: 0.5 }, async (tier) => {
      await tier.writeMany!([{ id: N, bytes: [new Uint8Array(8)], byteLength: 8 }]);
      // The last of these deletes leaves the sealed segment half dead: compacted, not pruned.
      for (let id = 0; id < N / 2 - 1; id++) await tier.delete(id);
      assert.equal(tier.stats().details.compactions, 0);
      // A test seam: the appends compaction makes (a private method of the segment store).
      const proto = SegmentStore.prototype as unknown as { append: (...args: unknown[]) => unknown };
      const { append } = proto;
      let appends = 0;
      proto.append = function (this: unknown, ...args: unknown[]): unknown {
        appends++;
        return append.apply(this, args);
      };
      let counts: number[];
      try {
        counts = await lookupsPerTurn(async () => {
          await tier.delete(N / 2 - 1);
          await tier.idle();
        });
      } finally {
        proto.append = append;
      }
      // One append per window of up to 2048 values, not one per value (each with its promises).
      assert.ok(appends <= Math.ceil((N / 2 + 1) / 2048) + 1, `${appends} appends to move ${N / 2 + 1} values`);
      assert.equal(tier.stats().details.compactions, 1);
      assert.equal(tier.stats().details.compactionErrors, 0);
      assert.equal(tier.segmentFiles().length, 1, 'the compacted segment was deleted');
      assert.ok(counts.every((c) => c <= PER_TURN), `lookups per turn: ${counts.filter((c) => c > 0).join(', ')}`);
      assert.equal(tier.usage().count, N / 2 + 1);
      for (const id of [N / 2, N / 2 + 12_345, N - 1]) assert.deepEqual([...(await tier.read(id))], new Array(8).fill(7));
    });
  });
});
