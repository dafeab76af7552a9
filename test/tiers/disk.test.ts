import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { InvalidArgumentError, TierDuplicateIdError } from '../../src/errors.js';
import type { CompressionMode } from '../../src/tiers/chunks.js';
import { DiskTier, type DiskTierOptions } from '../../src/tiers/disk/disk-tier.js';
import { tierContract } from '../../src/testing/index.js';
import { cleanupScope, onCleanup } from '../helpers/cleanup.js';
import { collect, filesUnder, noise, noiseItems, randomWalk, rawSource, tempDir, withDiskTier } from './helpers.js';

const KiB = 1024;
const MiB = 1024 * KiB;

function harness(options: Omit<DiskTierOptions, 'directory' | 'directories'>, dirCount: number) {
  return async () => {
    const scope = cleanupScope();
    const parents = await Promise.all(Array.from({ length: dirCount }, () => tempDir(scope)));
    return {
      tier: new DiskTier({ ...options, directories: parents }),
      parents,
      exactBytes: (options.compression ?? 'none') === 'none',
      cleanup: scope.end,
    };
  };
}

for (const compression of ['none', 'lz4', 'auto'] as CompressionMode[]) {
  for (const fused of [true, false]) {
    for (const dirs of [1, 2]) {
      const options: DiskTierOptions = { compression, smallValueBytes: fused ? MiB : 0 };
      tierContract(`DiskTier compression=${compression} ${fused ? 'fused' : 'file per value'} dirs=${dirs}`, harness(options, dirs));
    }
  }
}
tierContract(
  'DiskTier small segments (64 KiB values, 256 KiB segments, 16 KiB chunks, lz4)',
  harness({ compression: 'lz4', smallValueBytes: 64 * KiB, segmentBytes: 256 * KiB, chunkBytes: 16 * KiB }, 2),
);

/** 64 values of ~64 KiB with ids from `base`: 4 MiB, the flush size, so each batch is one group write of its own. */
function flushSizedBatch(base: number): { id: number; bytes: Uint8Array[]; byteLength: number }[] {
  return noiseItems(base, 64, 64 * KiB - 8);
}

describe('DiskTier', () => {
  it('rejects a misconfiguration in the constructor', () => {
    const bad: DiskTierOptions[] = [
      { capacity: 0 },
      { capacity: -5 },
      { capacity: Number.NaN },
      { directories: [] },
      { directories: [''] },
      { smallValueBytes: -1 },
      { smallValueBytes: Number.NaN },
      { smallValueBytes: 2 * MiB, segmentBytes: MiB },
      { segmentBytes: 0 },
      { chunkBytes: 0 },
      { chunkBytes: 64 * MiB },
      { compactDeadFraction: 1 },
      { compactDeadFraction: 0 },
      { compression: 'gzip' as CompressionMode },
      { directWrites: 'yes' as unknown as boolean },
      // Byte counts reach fs calls as lengths and positions: a fraction once aborted the
      // process on the first read (readSliceBytes) or streamed wrong bytes (streamChunkBytes).
      { segmentBytes: 1000.5 },
      { readSliceBytes: 1000.5 },
      { readSliceBytes: 0 },
      { streamChunkBytes: 1000.5 },
      { streamChunkBytes: -1 },
      // Lanes: an integer from 1 to 16.
      ...[0, -1, 1.5, 17, Number.NaN].map((segmentLanes) => ({ segmentLanes })),
    ];
    for (const options of bad) assert.throws(() => new DiskTier(options), InvalidArgumentError, JSON.stringify(options));
    assert.equal(new DiskTier().capacity, Infinity);
    assert.equal(new DiskTier({ segmentLanes: 16 }).capacity, Infinity);
  });

  it('fuses small values into one segment file and keeps large ones apart', async () => {
    await withDiskTier({ segmentLanes: 1 }, async (tier, parent) => {
      const small = Array.from({ length: 100 }, (_, i) => noise(100 + i));
      await Promise.all(small.map((b, i) => tier.write(i, rawSource(b), b.byteLength)));
      const big = noise(2 * MiB);
      await tier.write(1000, rawSource(big), big.byteLength);
      const files = await filesUnder([parent]);
      assert.equal(files.length, 2, files.map((f) => f.path).join());
      const stats = tier.stats();
      assert.equal(stats.details.fusedValues, 100);
      assert.equal(stats.details.fileValues, 1);
      assert.equal(stats.details.segmentFiles, 1);
      assert.ok(stats.details.flushes < 100, `group commit: ${stats.details.flushes} flushes for 100 values`);
      assert.equal(tier.pathOf(1000), files.find((f) => f.size === big.byteLength)?.path);
      for (let i = 0; i < 100; i++) await tier.delete(i);
      await tier.idle();
      assert.equal((await filesUnder([parent])).length, 1, 'the emptied segment file is deleted');
    });
  });

  it('writeMany: a batch of small values is one reservation and one flush', async () => {
    await withDiskTier({}, async (tier, parent) => {
      assert.ok(tier.writeMany !== undefined);
      assert.equal(new DiskTier({ directory: parent, smallValueBytes: 0 }).writeMany, undefined, 'no writeMany without fusing');
      const values = Array.from({ length: 200 }, (_, i) => noise(1000 + i));
      const shared = Buffer.concat(values);
      let at = 0;
      const items = values.map((v, i) => {
        const item = { id: i, bytes: [shared.subarray(at, at + v.byteLength)], byteLength: v.byteLength };
        at += v.byteLength;
        return item;
      });
      const results = await tier.writeMany(items);
      assert.ok(results.every((r) => r.status === 'fulfilled'));
      const stats = tier.stats();
      assert.equal(stats.details.flushes, 1);
      assert.equal(stats.details.segmentFiles, 1);
      assert.equal(stats.writes, 200);
      for (const [i, v] of values.entries()) assert.ok(Buffer.from(await tier.read(i)).equals(v));
    });
  });

  it('writeMany: two batches of a flush each (both in flight at once) land intact in adjacent ranges', async () => {
    // Buffered: a direct group's end is padded to a block (test/tiers/direct-io.test.ts).
    await withDiskTier({ segmentLanes: 1, directWrites: false }, async (tier, parent) => {
      // Each batch holds 4 MiB (the flush size), so each flushes at once: two group
      // writes in flight on one segment, at adjacent reserved ranges.
      const a = flushSizedBatch(0);
      const b = flushSizedBatch(1000);
      const [ra, rb] = await Promise.all([tier.writeMany?.(a), tier.writeMany?.(b)]);
      assert.ok(ra?.every((r) => r.status === 'fulfilled') && rb?.every((r) => r.status === 'fulfilled'));
      const stats = tier.stats();
      assert.equal(stats.details.flushes, 2);
      assert.equal(stats.details.segmentFiles, 1);
      for (const item of [...a, ...b]) assert.ok(Buffer.from(await tier.read(item.id)).equals(item.bytes[0]), `value ${item.id}`);
      const [file] = await filesUnder([parent]);
      assert.equal(file.size, [...a, ...b].reduce((n, item) => n + item.byteLength, 0), 'no gap or overlap between the two ranges');
    });
  });

  it('writeMany with the default two lanes: two batches in flight go to two segment files, each intact and fully used', async () => {
    await withDiskTier({ directWrites: false }, async (tier, parent) => {
      const a = flushSizedBatch(0);
      const b = flushSizedBatch(1000);
      const [ra, rb] = await Promise.all([tier.writeMany?.(a), tier.writeMany?.(b)]);
      assert.ok(ra?.every((r) => r.status === 'fulfilled') && rb?.every((r) => r.status === 'fulfilled'));
      assert.equal(tier.stats().details.segmentFiles, 2);
      const files = await filesUnder([parent]);
      const sizes = files.map((f) => f.size).sort((x, y) => x - y);
      const bytesOf = (items: typeof a): number => items.reduce((n, item) => n + item.byteLength, 0);
      assert.deepEqual(sizes, [bytesOf(a), bytesOf(b)].sort((x, y) => x - y), 'one batch per file, no gap');
      assert.deepEqual(tier.segmentFiles().map((f) => f.liveValues), [64, 64]);
      for (const item of [...a, ...b]) assert.ok(Buffer.from(await tier.read(item.id)).equals(item.bytes[0]), `value ${item.id}`);
      // The third batch goes back to the first lane, after the first batch.
      const c = flushSizedBatch(2000);
      assert.ok((await tier.writeMany?.(c))?.every((r) => r.status === 'fulfilled'));
      assert.equal(tier.stats().details.segmentFiles, 2);
      for (const item of c) assert.ok(Buffer.from(await tier.read(item.id)).equals(item.bytes[0]), `value ${item.id}`);
    });
  });

  it('reads of small values wanted together are coalesced, and each gets exactly its bytes', async () => {
    await withDiskTier({}, async (tier) => {
      const values = Array.from({ length: 300 }, (_, i) => noise(1000 + (i % 7) * 500));
      await tier.writeMany?.(values.map((v, id) => ({ id, bytes: [v], byteLength: v.byteLength })));
      // 200 neighbours at once: the first read goes alone, the rest wait for it and go as one run.
      const neighbours = values.slice(0, 200).map((_, id) => id);
      // Every third of the rest: gaps between them, so each is a call of its own.
      const scattered = values.map((_, id) => id).filter((id) => id >= 200 && id % 3 === 0);
      const wanted = [...neighbours, ...scattered];
      const got = await Promise.all(wanted.map((id) => tier.read(id)));
      wanted.forEach((id, k) => assert.ok(Buffer.from(got[k]).equals(values[id]), `value ${id}`));
      const { details, reads } = tier.stats();
      assert.equal(reads, wanted.length);
      assert.equal(details.coalescedReads, neighbours.length - 1);
      assert.equal(details.readCalls, 2 + scattered.length);
    });
  });

  it('one reader going through small values in order is served from read-ahead windows, never stale ones', async () => {
    await withDiskTier({}, async (tier) => {
      const batch = (from: number, n: number): { id: number; bytes: Uint8Array[]; byteLength: number }[] =>
        Array.from({ length: n }, (_, k) => {
          const v = noise(1500 + ((from + k) % 9) * 300);
          return { id: from + k, bytes: [v], byteLength: v.byteLength };
        });
      const first = batch(0, 300);
      await tier.writeMany?.(first);
      for (const item of first) assert.ok(Buffer.from(await tier.read(item.id)).equals(item.bytes[0]), `value ${item.id}`);
      const hits = Number(tier.stats().details.readAheadHits);
      assert.ok(hits > 250, `${hits} of 300 reads from a window`);
      // Appended after the windows were read, in the same (active) segment: read fresh.
      const second = batch(300, 50);
      await tier.writeMany?.(second);
      for (const item of [...first.slice(-5), ...second]) assert.ok(Buffer.from(await tier.read(item.id)).equals(item.bytes[0]), `value ${item.id}`);
    });
  });

  it('close during writeMany waits for the batch, keeps nothing, and leaves no file behind', async (t) => {
    const parent = await tempDir(t);
    const tier = new DiskTier({ directory: parent });
    await tier.open();
    onCleanup(t, () => tier.close());
    const values = Array.from({ length: 300 }, (_, i) => noise(3000 + i));
    const writing = tier.writeMany?.(values.map((v, id) => ({ id, bytes: [v], byteLength: v.byteLength })));
    await tier.close();
    const results = await writing;
    assert.equal(results?.length, values.length);
    assert.ok(results?.every((r) => r.status === 'rejected'), 'a value written as the tier closed is not reported stored');
    assert.deepEqual(tier.usage(), { count: 0, bytes: 0 });
    assert.deepEqual(await filesUnder([parent]), []);
  });

  it('an id deleted and written again while its segment is compacted keeps its new bytes', async () => {
    await withDiskTier({ smallValueBytes: 8 * KiB, segmentBytes: 64 * KiB, compactDeadFraction: 0.5 }, async (tier) => {
      const first = Array.from({ length: 60 }, (_, i) => noise(2000 + i));
      await tier.writeMany?.(first.map((v, id) => ({ id, bytes: [v], byteLength: v.byteLength })));
      const fresh = noise(1500);
      // The first (sealed) segment holds ids 0-31: deleting 0-23 leaves it mostly dead,
      // which queues its compaction; id 1 comes back with other bytes while it may run.
      await Promise.all(Array.from({ length: 24 }, (_, id) => tier.delete(id)));
      await tier.writeMany?.([{ id: 1, bytes: [fresh], byteLength: fresh.byteLength }]);
      await tier.idle();
      assert.ok(Buffer.from(await tier.read(1)).equals(fresh));
      for (let id = 24; id < 60; id++) assert.ok(Buffer.from(await tier.read(id)).equals(first[id]), `value ${id}`);
      assert.equal(tier.usage().count, 37);
      assert.ok(Number(tier.stats().details.compactions) >= 1, 'a segment was compacted');
      assert.ok(tier.pathOf(1).endsWith('.spws'), `a fused value's path is its segment's: ${tier.pathOf(1)}`);
    });
  });

  it('a segment of many small values that come and go does not keep their dead records', async () => {
    await withDiskTier({}, async (tier) => {
      const v = noise(40);
      const n = 5000;
      const results = await tier.writeMany?.(Array.from({ length: n }, (_, id) => ({ id, bytes: [v], byteLength: v.byteLength })));
      assert.ok(results?.every((r) => r.status === 'fulfilled'));
      for (let id = 0; id < n; id++) if (id % 50 !== 0) await tier.delete(id);
      const [seg] = tier.segmentFiles();
      assert.equal(seg.liveValues, n / 50);
      // Pruned once dead records outnumber live ones (and reach 1024): never more than
      // that many dead ones are kept.
      assert.ok(seg.records - seg.liveValues <= Math.max(1024, seg.liveValues), `${seg.records} records for ${seg.liveValues} live values`);
      for (let id = 0; id < n; id += 50) assert.ok(Buffer.from(await tier.read(id)).equals(v));
    });
  });

  it('writeMany: a batch larger than a segment is split across segments, one run each', async (t) => {
    const parents = [await tempDir(t), await tempDir(t)];
    const tier = new DiskTier({ directories: parents, smallValueBytes: 8 * KiB, segmentBytes: 16 * KiB });
    await tier.open();
    onCleanup(t, () => tier.close());
    const values = Array.from({ length: 50 }, (_, i) => noise(3 * KiB + i));
    const items = values.map((v, i) => ({ id: 100 + i, bytes: [v], byteLength: v.byteLength }));
    const results = await tier.writeMany?.(items);
    assert.ok(results?.every((r) => r.status === 'fulfilled'));
    const segments = tier.segmentFiles();
    assert.ok(segments.length >= 10, `${segments.length} segments`);
    for (const seg of segments) assert.ok(seg.bytes <= 16 * KiB, `segment of ${seg.bytes} bytes`);
    assert.equal(segments.reduce((n, seg) => n + seg.liveValues, 0), 50);
    for (const [i, v] of values.entries()) assert.ok(Buffer.from(await tier.read(100 + i)).equals(v));
    for (let i = 0; i < 50; i++) if (i % 3 !== 0) await tier.delete(100 + i);
    await tier.idle();
    for (let i = 0; i < 50; i += 3) assert.ok(Buffer.from(await tier.read(100 + i)).equals(values[i]), `value ${i} after compaction`);
  });

  it('uses directories in turn, each with a fresh folder, and removes them all', async (t) => {
    const parents = [await tempDir(t), await tempDir(t), await tempDir(t)];
    const tier = new DiskTier({ directories: parents, smallValueBytes: 0 });
    await tier.open();
    try {
      assert.equal(tier.directories.length, 3);
      for (const [i, dir] of tier.directories.entries()) assert.ok(dir.startsWith(parents[i]) && dir.includes('spillway-'));
      for (let i = 0; i < 6; i++) await tier.write(i, rawSource(noise(1000)), 1000);
      for (const parent of parents) assert.equal((await filesUnder([parent])).length, 2);
    } finally {
      await tier.close();
    }
    for (const parent of parents) assert.deepEqual(await fsp.readdir(parent), []);
  });

  it('compresses numeric data on disk (lz4 and auto) and skips noise in auto', async (t) => {
    const parent = await tempDir(t);
    for (const compression of ['lz4', 'auto'] as const) {
      const tier = new DiskTier({ directory: parent, compression });
      await tier.open();
      onCleanup(t, () => tier.close());
      const walk = Buffer.from(randomWalk(MiB / 2).buffer); // 4 MiB
      const random = noise(3 * MiB);
      await tier.write(1, rawSource(walk), walk.byteLength);
      await tier.write(2, rawSource(random), random.byteLength);
      const files = await filesUnder(tier.directories);
      const onDisk = files.reduce((s, f) => s + f.size, 0);
      const stats = tier.stats();
      assert.equal(onDisk, stats.bytes);
      assert.ok(stats.bytes < walk.byteLength / 1.5 + random.byteLength + 64, `${compression}: ${stats.bytes} bytes stored`);
      assert.equal(stats.details.compressedChunks, 4);
      assert.equal(stats.details.rawChunks, 3);
      assert.ok((await tier.read(1)).every((b, i) => b === walk[i]));
      assert.ok((await collect(tier.createReadStream(1, { start: MiB - 5, end: 3 * MiB + 7 }))).equals(walk.subarray(MiB - 5, 3 * MiB + 7)));
      await tier.close();
    }
  });

  it('compacts a mostly dead segment without losing a value, while reads go on', async () => {
    await withDiskTier({ smallValueBytes: 16 * KiB, segmentBytes: 64 * KiB }, async (tier, parent) => {
      const data = Array.from({ length: 64 }, (_, i) => noise(4 * KiB + i));
      for (const [i, b] of data.entries()) await tier.write(i, rawSource(b), b.byteLength);
      const before = tier.stats().details.segmentFiles;
      // Delete 3 of 4: every sealed segment is now mostly dead.
      for (let i = 0; i < data.length; i++) if (i % 4 !== 0) await tier.delete(i);
      const reads = data.map((b, i) => (i % 4 === 0 ? tier.read(i).then((got) => assert.ok(Buffer.from(got).equals(b))) : undefined));
      await Promise.all(reads);
      await tier.idle();
      const stats = tier.stats();
      assert.ok(stats.details.compactions > 0, 'compaction ran');
      assert.ok(stats.details.segmentFiles < before, `${stats.details.segmentFiles} segment files, ${before} before`);
      for (let i = 0; i < data.length; i += 4) assert.ok(Buffer.from(await tier.read(i)).equals(data[i]));
      const onDisk = (await filesUnder([parent])).reduce((s, f) => s + f.size, 0);
      assert.equal(onDisk, stats.details.segmentFileBytes);
    });
  });
});

describe('tier wrappers', () => {
  it('SlowTier and FaultyTier still work over DiskTier and forward stats', async (t) => {
    const { SlowTier, FaultyTier } = await import('../../src/testing/index.js');
    const parent = await tempDir(t);
    const disk = new DiskTier({ directory: parent });
    const faulty = new FaultyTier(new SlowTier(disk, 1), { failWrite: (id) => (id === 2 ? 'ENOSPC' : undefined) });
    await faulty.open();
    onCleanup(t, () => faulty.close());
    const bytes = noise(5000);
    await faulty.write(1, rawSource(bytes), bytes.byteLength);
    await assert.rejects(faulty.write(2, rawSource(bytes), bytes.byteLength), /ENOSPC/);
    assert.ok(Buffer.from(await faulty.read(1)).equals(bytes));
    assert.equal(faulty.stats?.().writes, 1);
    assert.equal(faulty.usage().count, 1);
    // writeMany goes through both wrappers; the faulty one fails item 2 alone.
    assert.ok(faulty.writeMany !== undefined);
    const results = await faulty.writeMany([3, 2, 4].map((id) => ({ id, bytes: [bytes], byteLength: bytes.byteLength })));
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.equal(faulty.batches, 1);
    assert.equal(faulty.usage().count, 3);
    faulty.plan = { failBatch: () => 'EIO' };
    await assert.rejects(faulty.writeMany([{ id: 5, bytes: [bytes], byteLength: bytes.byteLength }]), /EIO/);
    assert.equal(faulty.usage().count, 3);
  });
});

describe('DiskTier ids', () => {
  it('refuses exactly the ids it holds or is writing, whatever order ids come in (model-based)', async () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('write' as const), ids: fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 1, maxLength: 6 }) }),
      fc.record({ kind: fc.constant('many' as const), ids: fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 1, maxLength: 6 }) }),
      fc.record({ kind: fc.constant('delete' as const), ids: fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 1, maxLength: 3 }) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 12 }), fc.boolean(), async (ops, fused) => {
        await withDiskTier({ smallValueBytes: fused ? MiB : 0 }, async (tier) => {
          const held = new Map<number, Uint8Array>();
          for (const { kind, ids } of ops) {
            if (kind === 'delete') {
              for (const id of ids) {
                await tier.delete(id);
                held.delete(id);
              }
              continue;
            }
            // One group in flight at once: an id already held, or earlier in the group, is refused.
            const expected = ids.map((id, i) => !held.has(id) && ids.indexOf(id) === i);
            const bytes = ids.map((id) => noise(16 + id));
            const outcomes =
              kind === 'many' && tier.writeMany !== undefined
                ? await tier.writeMany(ids.map((id, i) => ({ id, bytes: [bytes[i]], byteLength: bytes[i].byteLength })))
                : await Promise.allSettled(ids.map((id, i) => tier.write(id, rawSource(bytes[i]), bytes[i].byteLength)));
            outcomes.forEach((outcome, i) => {
              assert.equal(outcome.status === 'fulfilled', expected[i], `${kind} of ${ids[i]} in [${ids}] (held: ${[...held.keys()]})`);
              if (outcome.status === 'rejected') assert.ok(outcome.reason instanceof TierDuplicateIdError);
            });
            ids.forEach((id, i) => expected[i] && held.set(id, bytes[i]));
          }
          for (const [id, bytes] of held) assert.ok(Buffer.from(await tier.read(id)).equals(bytes), `value ${id}`);
        });
      }),
      { numRuns: 40 },
    );
  });
});
