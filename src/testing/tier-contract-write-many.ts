/**
 * The optional `writeMany` part of the Tier contract, run by `tierContract` for every tier.
 * A tier without `writeMany` only has to say so (the store then writes one value at a time).
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ClosedError, SpillwayError } from '../errors.js';
import type { Tier, WriteItem, WriteResults } from '../tiers/tier.js';
import { assertMissing, roundTrip, withTier, type TierHarness } from './tier-contract.js';
import { filesUnder, noise, randomWalk } from './sources.js';

const MiB = 1024 * 1024;

type BatchTier = Tier & { writeMany: NonNullable<Tier['writeMany']> };

/** Lays `values` out back to back in one buffer, as the store does: each item is a view of it. */
function batchOf(ids: readonly number[], values: readonly Buffer[]): { items: WriteItem[]; shared: Buffer } {
  const shared = Buffer.concat(values);
  let at = 0;
  const items = values.map((v, i) => {
    const item = { id: ids[i], bytes: [shared.subarray(at, at + v.byteLength)], byteLength: v.byteLength };
    at += v.byteLength;
    return item;
  });
  return { items, shared };
}

function statuses(results: WriteResults): string[] {
  return results.map((r) => r.status);
}

function itWithBatches(name: string, make: () => Promise<TierHarness>, body: (tier: BatchTier, h: TierHarness) => Promise<void>): void {
  it(`writeMany: ${name}`, async (t) => {
    await withTier(make, async (h) => {
      if (h.tier.writeMany === undefined) {
        t.skip('this tier has no writeMany: the store writes its values one by one');
        return;
      }
      await body(h.tier as BatchTier, h);
    });
  });
}

export function writeManyContract(make: () => Promise<TierHarness>): void {
  itWithBatches('stores every item of a batch, each readable on its own, from bytes the caller reuses', make, async (tier, { exactBytes }) => {
    const sizes = [0, 1, 100, 4096, 4096, 70_000, 2 * MiB + 3];
    const values = sizes.map((n, i) => (i % 2 === 0 ? noise(n) : Buffer.from(randomWalk(Math.ceil(n / 8), i).buffer).subarray(0, n)));
    const ids = sizes.map((_, i) => 10 + i);
    const { items, shared } = batchOf(ids, values);
    const results = await tier.writeMany(items);
    assert.deepEqual(statuses(results), sizes.map(() => 'fulfilled'));
    // The bytes were only lent until writeMany settled.
    shared.fill(0xee);
    for (const [i, id] of ids.entries()) await roundTrip(tier, id, values[i]);
    const total = sizes.reduce((a, b) => a + b, 0);
    assert.equal(tier.usage().count, sizes.length);
    if (exactBytes) assert.equal(tier.usage().bytes, total);
    const stats = tier.stats?.();
    if (stats !== undefined) {
      assert.equal(stats.writes, sizes.length);
      assert.equal(stats.logicalBytes, total);
    }
    for (const id of ids) await tier.delete(id);
    assert.deepEqual(tier.usage(), { count: 0, bytes: 0 });
  });

  itWithBatches('fails bad items alone: duplicates, wrong lengths and bad ids store nothing, the rest is stored', make, async (tier) => {
    const held = noise(300);
    await tier.writeMany(batchOf([1], [held]).items);
    const good = [noise(500), noise(4096), noise(70_000)];
    const bad = noise(800);
    const items: WriteItem[] = [
      { id: 2, bytes: [good[0]], byteLength: good[0].byteLength },
      { id: 1, bytes: [bad], byteLength: bad.byteLength }, // held already
      { id: 3, bytes: [good[1].subarray(0, 96), good[1].subarray(96)], byteLength: good[1].byteLength },
      { id: 3, bytes: [bad], byteLength: bad.byteLength }, // twice in one batch
      { id: 4, bytes: [bad], byteLength: bad.byteLength + 1 }, // shorter than declared
      { id: 5, bytes: [bad, bad], byteLength: bad.byteLength }, // longer than declared
      { id: -1, bytes: [bad], byteLength: bad.byteLength },
      { id: 6, bytes: [good[2]], byteLength: good[2].byteLength },
    ];
    const results = await tier.writeMany(items);
    assert.deepEqual(statuses(results), ['fulfilled', 'rejected', 'fulfilled', 'rejected', 'rejected', 'rejected', 'rejected', 'fulfilled']);
    for (const r of results) if (r.status === 'rejected') assert.ok(r.reason instanceof Error, String(r.reason));
    await roundTrip(tier, 1, held);
    await roundTrip(tier, 2, good[0]);
    await roundTrip(tier, 3, good[1]);
    await roundTrip(tier, 6, good[2]);
    for (const id of [4, 5]) await assertMissing(tier, id);
    assert.equal(tier.usage().count, 4);
    // Failed ids stay usable.
    const again = await tier.writeMany([{ id: 4, bytes: [bad], byteLength: bad.byteLength }]);
    assert.deepEqual(statuses(again), ['fulfilled']);
    await roundTrip(tier, 4, bad);
    for (const id of [1, 2, 3, 4, 6]) await tier.delete(id);
    assert.deepEqual(tier.usage(), { count: 0, bytes: 0 });
  });

  itWithBatches('a delete during writeMany cancels that item only', make, async (tier) => {
    const values = [noise(1000), noise(2000), noise(3000)];
    const writing = tier.writeMany(batchOf([21, 22, 23], values).items);
    const deleting = tier.delete(22);
    const results = await writing;
    await deleting;
    assert.equal(results[0].status, 'fulfilled');
    assert.equal(results[2].status, 'fulfilled');
    // Either the delete came first (the write is cancelled) or after it (the value is gone): never a leftover.
    if (results[1].status === 'rejected') assert.ok(results[1].reason instanceof SpillwayError);
    await assertMissing(tier, 22);
    await roundTrip(tier, 21, values[0]);
    await roundTrip(tier, 23, values[2]);
    assert.equal(tier.usage().count, 2);
  });

  itWithBatches('an empty batch resolves with no results', make, async (tier) => {
    assert.deepEqual(await tier.writeMany([]), []);
    assert.deepEqual(tier.usage(), { count: 0, bytes: 0 });
  });

  it('writeMany: after close, stores nothing', async () => {
    const h = await make();
    try {
      await h.tier.open();
      const writeMany = h.tier.writeMany?.bind(h.tier);
      await h.tier.close();
      if (writeMany === undefined) return;
      const outcome = await writeMany(batchOf([1, 2], [noise(10), noise(5000)]).items).then(
        (results) => results,
        (err: unknown) => err,
      );
      if (Array.isArray(outcome)) for (const r of outcome as WriteResults) assert.equal(r.status, 'rejected');
      else assert.ok(outcome instanceof ClosedError, String(outcome));
      assert.deepEqual(h.tier.usage(), { count: 0, bytes: 0 });
      assert.deepEqual(await filesUnder(h.parents), []);
    } finally {
      await h.tier.close().catch(() => undefined);
      await h.cleanup();
    }
  });
}
