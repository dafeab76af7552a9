/**
 * The Tier contract, runnable against any tier: `tierContract('my tier', makeHarness)`.
 * Every test builds a fresh tier through the factory and always calls `cleanup`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeVerified } from '../codec/index.js';
import { ClosedError, InvalidArgumentError, SpillwayError } from '../errors.js';
import type { Tier } from '../tiers/tier.js';
import { writeManyContract } from './tier-contract-write-many.js';
import { collect, encodedSource, entriesUnder, failingSource, filesUnder, noise, randomWalk, rawSource, slowSource } from './sources.js';

export interface TierHarness {
  tier: Tier;
  /** Folders the tier may write into (its parents); [] for a tier that keeps no files. */
  parents: string[];
  /** Whether `usage().bytes` must equal the bytes written (false when the tier compresses). */
  exactBytes: boolean;
  /** Removes the parents (after the tier is closed). */
  cleanup(): Promise<void>;
}

const MiB = 1024 * 1024;

export async function withTier(make: () => Promise<TierHarness>, body: (h: TierHarness) => Promise<void>): Promise<void> {
  const h = await make();
  try {
    await h.tier.open();
    await body(h);
  } finally {
    await h.tier.close().catch(() => undefined);
    await h.cleanup();
  }
}

const isMissing = (err: unknown): boolean => err instanceof SpillwayError && err.code === 'SPW_ERR_TIER_MISSING';

export async function assertMissing(tier: Tier, id: number): Promise<void> {
  await assert.rejects(tier.read(id), isMissing);
  if (tier.readInto !== undefined) await assert.rejects(tier.readInto(id, new Uint8Array(1)), isMissing, 'readInto of a missing value');
}

export async function roundTrip(tier: Tier, id: number, bytes: Uint8Array): Promise<void> {
  const pieces: Buffer[] = [];
  const back = await tier.read(id, (chunk) => pieces.push(Buffer.from(chunk)));
  assert.equal(back.byteLength, bytes.byteLength, `length of value ${id}`);
  assert.ok(Buffer.from(back.buffer, back.byteOffset, back.byteLength).equals(bytes), `bytes of value ${id}`);
  assert.equal(back.byteOffset % 8, 0, 'read buffer is 8-byte aligned');
  assert.ok(Buffer.concat(pieces).equals(bytes), 'onChunk saw every byte in order');
  assert.ok((await collect(tier.createReadStream(id))).equals(bytes), 'full stream');
  await readIntoChecked(tier, id, bytes);
}

/**
 * `readInto` (when the tier has it): the bytes land exactly in the caller's view (one at an
 * odd offset inside a larger buffer, whose other bytes stay as they were), and a buffer of
 * any other size is refused.
 */
async function readIntoChecked(tier: Tier, id: number, bytes: Uint8Array): Promise<void> {
  const readInto = tier.readInto?.bind(tier);
  if (readInto === undefined) return;
  const whole = new Uint8Array(bytes.byteLength + 10).fill(0xa5);
  await readInto(id, whole.subarray(3, 3 + bytes.byteLength));
  assert.ok(Buffer.from(whole.buffer, 3, bytes.byteLength).equals(bytes), `readInto: bytes of value ${id}`);
  assert.ok(whole.subarray(0, 3).every((b) => b === 0xa5) && whole.subarray(3 + bytes.byteLength).every((b) => b === 0xa5), 'readInto wrote outside its buffer');
  await assert.rejects(readInto(id, new Uint8Array(bytes.byteLength + 1)), InvalidArgumentError, 'readInto into a buffer of the wrong size');
}

/** A 6 MiB value: compressible numbers, then noise, so chunks differ in kind. */
async function mixedValue(): Promise<{ value: unknown; size: number }> {
  const value = { walk: randomWalk((3 * MiB) / 8), noise: noise(2 * MiB + 13), label: 'mixed' };
  return { value, size: 5 * MiB };
}

export function tierContract(label: string, make: () => Promise<TierHarness>): void {
  describe(`Tier contract: ${label}`, () => {
    it('round-trips encoded values exactly, aligned, with onChunk and streams', async () => {
      await withTier(make, async ({ tier }) => {
        const values: unknown[] = [
          { a: 1, s: 'x', nested: [1, 2, { deep: true }] },
          'a string value',
          Float64Array.from({ length: 1000 }, (_, i) => i / 3),
          Buffer.from('raw bytes'),
          Array.from({ length: 2000 }, (_, i) => ({ i, name: `row ${i}` })),
          (await mixedValue()).value,
        ];
        let id = 1;
        for (const value of values) {
          const { source, bytes } = await encodedSource(value);
          await tier.write(id, source, bytes.byteLength);
          await roundTrip(tier, id, bytes);
          assert.deepEqual(await decodeVerified(await tier.read(id)), value);
          id++;
        }
        assert.equal(tier.usage().count, values.length);
      });
    });

    it('stores 0-byte, 1-byte and multi-MiB values', async () => {
      await withTier(make, async ({ tier }) => {
        const cases = [Buffer.alloc(0), Buffer.from([7]), Buffer.from(randomWalk(MiB).buffer), noise(3 * MiB + 5)];
        for (const [i, bytes] of cases.entries()) await tier.write(i, rawSource(bytes), bytes.byteLength);
        for (const [i, bytes] of cases.entries()) await roundTrip(tier, i, bytes);
        const empty = async function* (): AsyncGenerator<Uint8Array[]> {};
        await tier.write(99, empty(), 0);
        assert.equal((await tier.read(99)).byteLength, 0);
        assert.equal((await collect(tier.createReadStream(99))).byteLength, 0);
      });
    });

    it('streams byte ranges, across chunk boundaries and clamped at the end', async () => {
      await withTier(make, async ({ tier }) => {
        const big = Buffer.concat([Buffer.from(randomWalk(MiB / 2).buffer), noise(MiB + 77), Buffer.from(randomWalk(MiB / 4).buffer)]);
        const small = noise(5000);
        await tier.write(1, rawSource(big), big.byteLength);
        await tier.write(2, rawSource(small), small.byteLength);
        for (const [id, bytes] of [
          [1, big],
          [2, small],
        ] as const) {
          const n = bytes.byteLength;
          const ranges = [
            { start: 0, end: n },
            { start: 0, end: 1 },
            { start: n - 1, end: n },
            { start: 3, end: Math.min(n, MiB + 5) },
            { start: Math.min(MiB - 3, n - 10), end: Math.min(MiB + 9, n) },
            { start: 100 },
            { end: 4097 },
            { start: 10, end: 10 },
            { start: n + 10, end: n + 20 },
            { start: 5, end: n + 1000 },
          ];
          for (const r of ranges) {
            const got = await collect(tier.createReadStream(id, r));
            const s = Math.min(r.start ?? 0, n);
            const e = Math.max(s, Math.min(r.end ?? n, n));
            assert.ok(got.equals(bytes.subarray(s, e)), `range ${JSON.stringify(r)} of value ${id}`);
          }
        }
        await assert.rejects(collect(tier.createReadStream(1, { start: -1 })), InvalidArgumentError);
        await assert.rejects(collect(tier.createReadStream(12345)), (e: unknown) => e instanceof SpillwayError);
      });
    });

    it('deletes idempotently; a deleted value is gone', async () => {
      await withTier(make, async ({ tier }) => {
        const bytes = noise(10_000);
        await tier.write(5, rawSource(bytes), bytes.byteLength);
        await tier.delete(5);
        await tier.delete(5);
        await tier.delete(424242);
        await assertMissing(tier, 5);
        assert.deepEqual(tier.usage(), { count: 0, bytes: 0 });
      });
    });

    it('accounts usage for every value and returns to zero', async () => {
      await withTier(make, async ({ tier, exactBytes }) => {
        const sizes = [0, 1, 100, 4096, 70_000, 2 * MiB];
        let total = 0;
        for (const [i, size] of sizes.entries()) {
          const bytes = Buffer.from(randomWalk(Math.ceil(size / 8)).buffer).subarray(0, size);
          await tier.write(i, rawSource(bytes), size);
          total += size;
          const usage = tier.usage();
          assert.equal(usage.count, i + 1);
          if (exactBytes) assert.equal(usage.bytes, total);
          else assert.ok((usage.bytes > 0 || total === 0) && usage.bytes <= total, `compressed usage ${usage.bytes} of ${total}`);
        }
        const stats = tier.stats?.();
        if (stats !== undefined) {
          assert.equal(stats.count, sizes.length);
          assert.equal(stats.bytes, tier.usage().bytes);
          assert.equal(stats.logicalBytes, total);
          assert.equal(stats.writes, sizes.length);
        }
        for (const i of sizes.keys()) await tier.delete(i);
        assert.deepEqual(tier.usage(), { count: 0, bytes: 0 });
      });
    });

    it('leaves nothing behind when a write fails midway or has the wrong length', async () => {
      await withTier(make, async ({ tier, parents }) => {
        const big = noise(3 * MiB);
        const small = noise(4096);
        await assert.rejects(tier.write(1, failingSource(big, 1.5 * MiB), big.byteLength), /midway/);
        await assert.rejects(tier.write(2, failingSource(small, 100), small.byteLength), /midway/);
        await assert.rejects(tier.write(3, rawSource(small), small.byteLength + 1), SpillwayError);
        await assert.rejects(tier.write(4, rawSource(big), big.byteLength - 1), SpillwayError);
        for (const id of [1, 2, 3, 4]) await assertMissing(tier, id);
        assert.deepEqual(tier.usage(), { count: 0, bytes: 0 });
        assert.deepEqual(await filesUnder(parents), [], 'no file left by failed writes');
        // The ids stay usable: the store may retry a failed write.
        await tier.write(2, rawSource(small), small.byteLength);
        await roundTrip(tier, 2, small);
      });
    });

    it('close removes everything and refuses later writes', async () => {
      const h = await make();
      try {
        await h.tier.open();
        for (const [i, size] of [10, 5000, 2 * MiB].entries()) {
          const bytes = noise(size);
          await h.tier.write(i, rawSource(bytes), size);
        }
        await h.tier.close();
        assert.deepEqual(await entriesUnder(h.parents), [], 'close removed every file and folder');
        assert.deepEqual(h.tier.usage(), { count: 0, bytes: 0 });
        await assert.rejects(h.tier.write(9, rawSource(Buffer.from('x')), 1), ClosedError);
      } finally {
        await h.tier.close().catch(() => undefined);
        await h.cleanup();
      }
    });

    it('keeps ids apart and rejects bad or duplicate ids', async () => {
      await withTier(make, async ({ tier }) => {
        const ids = [0, 1, 2 ** 31, 2 ** 40, Number.MAX_SAFE_INTEGER];
        const data = ids.map((_, i) => noise(100 + i * 3000));
        await Promise.all(ids.map((id, i) => tier.write(id, rawSource(data[i]), data[i].byteLength)));
        for (const [i, id] of ids.entries()) await roundTrip(tier, id, data[i]);
        await assert.rejects(tier.write(0, rawSource(noise(10)), 10), SpillwayError);
        await roundTrip(tier, 0, data[0]);
        await assert.rejects(tier.write(-1, rawSource(noise(10)), 10), InvalidArgumentError);
        await assert.rejects(tier.write(1.5, rawSource(noise(10)), 10), InvalidArgumentError);
      });
    });

    it('handles concurrent writes, reads and deletes', async () => {
      await withTier(make, async ({ tier }) => {
        const sizes = Array.from({ length: 60 }, (_, i) => (i % 15 === 0 ? 2 * MiB + i : (i * 7919) % 200_000));
        const data = sizes.map((size, i) => (i % 2 === 0 ? noise(size) : Buffer.from(randomWalk(Math.ceil(size / 8), i).buffer).subarray(0, size)));
        await Promise.all(data.map((bytes, i) => tier.write(i, rawSource(bytes), bytes.byteLength)));
        await Promise.all([
          ...data.map((bytes, i) => (i % 3 === 0 ? tier.delete(i) : roundTrip(tier, i, bytes))),
          ...data.map((bytes, i) => tier.write(1000 + i, rawSource(bytes), bytes.byteLength)),
        ]);
        for (const [i, bytes] of data.entries()) {
          if (i % 3 === 0) await assertMissing(tier, i);
          else await roundTrip(tier, i, bytes);
          await roundTrip(tier, 1000 + i, bytes);
        }
        assert.equal(tier.usage().count, data.length * 2 - Math.ceil(data.length / 3));
      });
    });

    it('a delete during a write cancels it and leaves nothing', async () => {
      await withTier(make, async ({ tier, parents }) => {
        const bytes = noise(2 * MiB);
        const writing = tier.write(7, slowSource(bytes), bytes.byteLength);
        const settled = writing.then(
          () => 'stored',
          () => 'rejected',
        );
        await new Promise((resolve) => setTimeout(resolve, 5));
        await tier.delete(7);
        assert.equal(await settled, 'rejected');
        await assertMissing(tier, 7);
        assert.deepEqual(tier.usage(), { count: 0, bytes: 0 });
        assert.deepEqual(await filesUnder(parents), []);
      });
    });

    writeManyContract(make);
  });
}
