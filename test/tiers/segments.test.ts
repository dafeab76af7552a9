/** Model-based test of fused segment files: random writes, deletes and reads against a Map. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { DiskTier } from '../../src/tiers/disk/disk-tier.js';
import { cleanupScope } from '../helpers/cleanup.js';
import { collect, filesUnder, randomWalk, rawSource, tempDir } from './helpers.js';

const KiB = 1024;

type Op =
  | { kind: 'write'; size: number; numeric: boolean }
  | { kind: 'delete'; pick: number }
  | { kind: 'read'; pick: number; start: number; length: number }
  | { kind: 'burst'; sizes: number[]; deletes: number[] }
  | { kind: 'many'; sizes: number[]; cancel: number[]; deletes: number[]; reads: number[] }
  | { kind: 'scan' }
  | { kind: 'idle' };

/**
 * The sizes of a run, `scale` times the first ones: 32 KiB segments and values under 12 KiB
 * (groups never reach direct writes' 128 KiB, so all are buffered); at 16, 512 KiB segments
 * and values under 192 KiB, whose batches and compaction windows are mostly written direct.
 */
function scaled(scale: number): { segment: number; small: number; op: fc.Arbitrary<Op> } {
  const small = 12 * KiB * scale;
  // Empty values are common on purpose: one shares its offset with the value appended after
  // it, which is what compaction's windows once got wrong.
  const size = fc.oneof(
    { weight: 1, arbitrary: fc.constant(0) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 64 }) },
    { weight: 4, arbitrary: fc.integer({ min: 65, max: small - 1 }) },
  );
  const op: fc.Arbitrary<Op> = fc.oneof(
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('write' as const), size, numeric: fc.boolean() }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('delete' as const), pick: fc.nat() }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('read' as const), pick: fc.nat(), start: fc.nat(20 * KiB * scale), length: fc.nat(20 * KiB * scale) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('burst' as const), sizes: fc.array(size, { maxLength: 12 }), deletes: fc.array(fc.nat(), { maxLength: 12 }) }) },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('many' as const),
        sizes: fc.array(size, { minLength: 1, maxLength: 40 }),
        cancel: fc.array(fc.nat(), { maxLength: 4 }),
        deletes: fc.array(fc.nat(), { maxLength: 8 }),
        reads: fc.array(fc.nat(), { maxLength: 16 }),
      }),
    },
    { weight: 1, arbitrary: fc.constant({ kind: 'scan' as const }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'idle' as const }) },
  );
  return { segment: 32 * KiB * scale, small, op };
}

function bytesFor(id: number, n: number, numeric: boolean): Buffer {
  if (!numeric) return Buffer.from(Array.from({ length: n }, (_, i) => (id * 31 + i * 7 + ((i * i) >> 3)) & 255));
  return Buffer.from(randomWalk(Math.ceil(n / 8), id + 1).buffer).subarray(0, n);
}

async function assertGone(tier: DiskTier, id: number): Promise<void> {
  await assert.rejects(tier.read(id), (err: Error) => err.name === 'TierMissingError', `value ${id} was deleted`);
}

async function checkDisk(tier: DiskTier, parents: string[], model: Map<number, Buffer>, openSegments: number, segment: number): Promise<void> {
  await tier.idle();
  for (const [id, bytes] of model) assert.ok(Buffer.from(await tier.read(id)).equals(bytes), `value ${id} after compaction`);
  assert.equal(tier.stats().details.compactionErrors, 0, 'no compaction failed');
  const segments = tier.segmentFiles();
  for (const s of segments) assert.ok(s.liveValues > 0, `segment ${s.path} survives with no live value`);
  const onDisk = await filesUnder(parents);
  assert.deepEqual(onDisk.map((f) => f.path).sort(), segments.map((s) => s.path).sort(), 'files on disk are exactly the segments');
  const fileBytes = onDisk.reduce((sum, f) => sum + f.size, 0);
  const live = tier.usage().bytes;
  // Sealed segments are at least half live after compaction (direct writes' padding counts
  // as dead); each lane of each directory has one open segment.
  assert.ok(fileBytes <= 2 * live + openSegments * segment, `disk ${fileBytes} bytes for ${live} live bytes`);
}

/**
 * Runs the model: `runs` random sequences of operations at `scale` (see `scaled`). Returns
 * the read-ahead hits and the direct group writes over all runs.
 */
async function runModel(scale: number, runs: number): Promise<{ readAheadHits: number; directFlushes: number }> {
  const { segment, small, op } = scaled(scale);
  let readAheadHits = 0;
  let completed = 0;
  let directFlushes = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(op, { minLength: 40, maxLength: 150, size: 'max' }), fc.constantFrom(1, 2), fc.constantFrom(1, 2), fc.constantFrom('none', 'lz4') as fc.Arbitrary<'none' | 'lz4'>, async (ops, dirs, lanes, compression) => {
        const scope = cleanupScope();
        const parents = await Promise.all(Array.from({ length: dirs }, () => tempDir(scope, 'spw-seg-')));
        const tier = new DiskTier({ directories: parents, smallValueBytes: small, segmentBytes: segment, segmentLanes: lanes, compression, chunkBytes: 8 * KiB });
        await tier.open();
        const model = new Map<number, Buffer>();
        let nextId = 0;
        const pickId = (pick: number): number | undefined => {
          const ids = [...model.keys()];
          return ids.length === 0 ? undefined : ids[pick % ids.length];
        };
        const write = async (n: number, numeric: boolean): Promise<void> => {
          const id = nextId++;
          const bytes = bytesFor(id, n, numeric);
          await tier.write(id, rawSource(bytes, 1000), n);
          model.set(id, bytes);
        };
        const remove = async (id: number | undefined): Promise<void> => {
          if (id === undefined) return;
          model.delete(id);
          await tier.delete(id);
        };
        try {
          for (const o of ops) {
            if (o.kind === 'write') await write(o.size, o.numeric);
            else if (o.kind === 'delete') await remove(pickId(o.pick));
            else if (o.kind === 'read') {
              const id = pickId(o.pick);
              if (id === undefined) continue;
              const bytes = model.get(id) as Buffer;
              assert.ok(Buffer.from(await tier.read(id)).equals(bytes));
              const got = await collect(tier.createReadStream(id, { start: o.start, end: o.start + o.length }));
              assert.ok(got.equals(bytes.subarray(o.start, o.start + o.length)));
            } else if (o.kind === 'many') {
              // One writeMany call; while it is in flight, deletes of some of its own ids
              // (cancelled, or deleted right after) and of older ones, and reads of older ones.
              const ids = o.sizes.map(() => nextId++);
              const values = o.sizes.map((n, k) => bytesFor(ids[k], n, k % 2 === 0));
              const older = [...model.keys()];
              const writing = tier.writeMany?.(ids.map((id, k) => ({ id, bytes: [values[k]], byteLength: values[k].byteLength }))) ?? Promise.resolve([]);
              const cancelled = [...new Set(o.cancel.map((c) => ids[c % ids.length]))];
              const victims = [...new Set(o.deletes.map(pickId))].filter((id): id is number => id !== undefined);
              const readIds = older.length === 0 ? [] : o.reads.map((r) => older[r % older.length]).filter((id) => !victims.includes(id));
              const expected = new Map(readIds.map((id) => [id, model.get(id) as Buffer]));
              for (const id of victims) model.delete(id);
              const [results, , got] = await Promise.all([
                writing,
                Promise.all([...cancelled, ...victims].map((id) => tier.delete(id))),
                Promise.all(readIds.map((id) => tier.read(id))),
              ]);
              readIds.forEach((id, k) => assert.ok(Buffer.from(got[k]).equals(expected.get(id) as Buffer), `read of ${id} during a batch`));
              ids.forEach((id, k) => {
                if (cancelled.includes(id)) return;
                assert.equal(results[k]?.status, 'fulfilled', `batch item ${id}`);
                model.set(id, values[k]);
              });
              for (const id of cancelled) await assertGone(tier, id);
            } else if (o.kind === 'scan') {
              // One reader, one value at a time, in the order they were written: read-ahead
              // windows serve most of it, and must never serve bytes that changed.
              for (const [id, bytes] of [...model].sort((a, b) => a[0] - b[0])) {
                assert.ok(Buffer.from(await tier.read(id)).equals(bytes), `scan: value ${id}`);
              }
            } else if (o.kind === 'burst') {
              const victims = [...new Set(o.deletes.map(pickId))];
              await Promise.all([...o.sizes.map((n, i) => write(n, i % 2 === 0)), ...victims.map(remove)]);
            } else await checkDisk(tier, parents, model, dirs * lanes, segment);
            assert.equal(tier.usage().count, model.size);
          }
          await checkDisk(tier, parents, model, dirs * lanes, segment);
          for (const id of [...model.keys()]) await remove(id);
          await tier.idle();
          assert.deepEqual(await filesUnder(parents), [], 'no segment file survives once all its values are deleted');
          assert.deepEqual(tier.usage(), { count: 0, bytes: 0 });
          completed++;
        } finally {
          readAheadHits += Number(tier.stats().details.readAheadHits);
          directFlushes += Number(tier.stats().details.directFlushes);
          await tier.close();
          await scope.end();
        }
      }),
    { numRuns: runs, interruptAfterTimeLimit: 120_000 },
  );
  // On a loaded machine the time limit may end the run early; a handful of complete
  // sequences is still a real check, none would not be.
  assert.ok(completed >= Math.min(runs, 10), `only ${completed} of ${runs} sequences ran in the time limit`);
  return { readAheadHits, directFlushes };
}

describe('fused segment files (model-based)', () => {
  it('reads exact bytes, stays bounded, drops empty segments, never loses a value', async () => {
    const { readAheadHits } = await runModel(1, 40);
    assert.ok(readAheadHits > 0, 'the runs read some values from read-ahead windows');
  });

  it('the same with values and segments 16 times larger, their groups and compaction windows written direct', async () => {
    const { directFlushes } = await runModel(16, 25);
    assert.ok(directFlushes > 0, 'some groups were written past the page cache');
  });
});
