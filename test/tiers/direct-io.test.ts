import assert from 'node:assert/strict';
import { constants } from 'node:fs';
import fsp, { type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, it, mock } from 'node:test';
import fc from 'fast-check';
import { DIRECT_ALIGN, DIRECT_MIN_BYTES, DirectRefused, DirectWrites, StagingPool, alignUp, splitPieces } from '../../src/tiers/disk/direct-io.js';
import { filesUnder, noise, noiseItems, withDiskTier, withTempDir } from './helpers.js';

const KiB = 1024;

/** Cuts `bytes` into consecutive views at the given lengths (the rest is the last piece). */
function cut(bytes: Uint8Array, lengths: number[]): Uint8Array[] {
  const pieces: Uint8Array[] = [];
  let at = 0;
  for (const length of lengths) {
    const end = Math.min(bytes.byteLength, at + length);
    pieces.push(bytes.subarray(at, end));
    at = end;
  }
  pieces.push(bytes.subarray(at));
  return pieces;
}

/** A FileHandle stand-in whose writes fail with `code`. */
function failingHandle(code: string): FileHandle {
  const fail = async (): Promise<never> => {
    throw Object.assign(new Error(`${code}: simulated`), { code });
  };
  return { write: fail, writev: fail } as unknown as FileHandle;
}

afterEach(() => mock.restoreAll());

describe('direct writes: the pieces', () => {
  it('splitPieces cuts a list of pieces after any byte, views only, nothing lost or repeated', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 300 }), fc.array(fc.nat(80), { maxLength: 8 }), fc.nat(320), (bytes, lengths, at) => {
        const pieces = cut(bytes, lengths);
        const [head, tail] = splitPieces(pieces, at);
        const headBytes = Buffer.concat(head);
        assert.deepEqual(headBytes, Buffer.from(bytes.subarray(0, Math.min(at, bytes.byteLength))));
        assert.deepEqual(Buffer.concat([headBytes, ...tail]), Buffer.from(bytes));
        for (const piece of [...head, ...tail]) assert.equal(piece.buffer, bytes.buffer);
      }),
    );
  });

  it('write lands the bytes at an aligned offset and pads the last block with zeros, across staging buffers', async () => {
    await withTempDir(async (dir) => {
      const file = path.join(dir, 'segment');
      await fsp.writeFile(file, '');
      const direct = new DirectWrites(true);
      const handle = await direct.open(file);
      assert.ok(handle !== undefined, 'the temp directory takes O_DIRECT');
      try {
        await fc.assert(
          fc.asyncProperty(fc.integer({ min: 1, max: 2.5 * 1024 * KiB }), fc.array(fc.integer({ min: 0, max: 600 * KiB }), { maxLength: 6 }), fc.nat(3), async (length, lengths, block) => {
            const bytes = noise(length);
            const position = block * DIRECT_ALIGN * 7;
            await fsp.truncate(file, 0);
            await direct.write(handle, cut(bytes, lengths), position, length);
            const stored = await fsp.readFile(file);
            assert.equal(stored.byteLength, position + alignUp(length));
            assert.ok(stored.subarray(position, position + length).equals(bytes));
            assert.ok(stored.subarray(position + length).every((b) => b === 0), 'zeros to the block end');
          }),
          { numRuns: 12 },
        );
      } finally {
        await handle.close();
      }
      assert.equal(direct.on, true);
    });
  });

  it('a write refused with EINVAL throws DirectRefused and turns direct writes off; another error is passed on and leaves them on', async () => {
    const refused = new DirectWrites(true);
    await assert.rejects(refused.write(failingHandle('EINVAL'), [noise(8 * KiB)], 0, 8 * KiB), DirectRefused);
    assert.equal(refused.on, false);
    assert.match(refused.offBecause ?? '', /EINVAL/);

    const broken = new DirectWrites(true);
    await assert.rejects(broken.write(failingHandle('EIO'), [noise(8 * KiB)], 0, 8 * KiB), { code: 'EIO' });
    assert.equal(broken.on, true);
  });

  it('a filesystem that refuses O_DIRECT at open turns direct writes off, without an error', async () => {
    mock.method(fsp, 'open', async () => {
      throw Object.assign(new Error('EINVAL: simulated'), { code: 'EINVAL' });
    });
    const direct = new DirectWrites(true);
    assert.equal(await direct.open('/nowhere/segment'), undefined);
    assert.equal(direct.on, false);
    assert.match(direct.offBecause ?? '', /refuses O_DIRECT/);
  });

  it('without page-aligned staging memory (address space refused) direct writes turn off at open, and a write is refused', async () => {
    const wasm = (globalThis as unknown as { WebAssembly: { Memory: unknown } }).WebAssembly;
    const Memory = wasm.Memory;
    wasm.Memory = class {
      constructor() {
        throw new RangeError('WebAssembly.Memory(): could not allocate memory (simulated)');
      }
    };
    try {
      const direct = new DirectWrites(true, new StagingPool());
      assert.equal(await direct.open('/nowhere/segment'), undefined);
      assert.equal(direct.on, false);
      assert.match(direct.offBecause ?? '', /staging memory/);
      const writing = new DirectWrites(true, new StagingPool());
      await assert.rejects(writing.write(failingHandle('EIO'), [noise(8 * KiB)], 0, 8 * KiB), DirectRefused);
      assert.equal(writing.on, false);
    } finally {
      wasm.Memory = Memory;
    }
  });

  it('asked not to, or without O_DIRECT on the platform, it is off from the start', () => {
    assert.equal(new DirectWrites(false).on, false);
    assert.equal(new DirectWrites(true).on, typeof constants.O_DIRECT === 'number');
  });
});

describe('direct writes in a DiskTier', () => {
  it('writes big groups direct: two in flight on one segment land intact in padded, adjacent ranges; the stats say so', async () => {
    await withDiskTier({ segmentLanes: 1 }, async (tier, parent) => {
      // 4 MiB each (the flush size, minus a few bytes so neither ends on a block): two group writes in flight at once.
      const a = noiseItems(0, 64, 64 * KiB - 8);
      const b = noiseItems(1000, 64, 64 * KiB - 9);
      const [ra, rb] = await Promise.all([tier.writeMany?.(a), tier.writeMany?.(b)]);
      assert.ok(ra?.every((r) => r.status === 'fulfilled') && rb?.every((r) => r.status === 'fulfilled'));
      const { details } = tier.stats();
      assert.equal(details.directWrites, 1);
      assert.equal(details.directFlushes, 2);
      for (const item of [...a, ...b]) assert.ok(Buffer.from(await tier.read(item.id)).equals(item.bytes[0]), `value ${item.id}`);
      const bytesOf = (items: typeof a): number => items.reduce((n, item) => n + item.byteLength, 0);
      const [file] = await filesUnder([parent]);
      assert.equal(file.size, alignUp(bytesOf(a)) + alignUp(bytesOf(b)), 'each group padded to a block, no gap beyond it');
      assert.equal(details.segmentFileBytes, file.size);
    });
  });

  it('groups that start mid-block (a head written buffered) and small groups between them stay intact, on one lane and two', async () => {
    // Over the runs, both kinds of group must have been written, or the property proves little.
    let direct = 0;
    let buffered = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ count: fc.integer({ min: 1, max: 40 }), bytes: fc.integer({ min: 1, max: 12 * KiB }), together: fc.boolean() }), { minLength: 1, maxLength: 8 }),
        fc.constantFrom(1, 2),
        async (batches, segmentLanes) => {
          await withDiskTier({ segmentLanes, segmentBytes: 2 * 1024 * KiB }, async (tier) => {
            const written: { id: number; bytes: Uint8Array[]; byteLength: number }[] = [];
            let base = 0;
            let inFlight: Promise<unknown>[] = [];
            for (const b of batches) {
              const items = noiseItems(base, b.count, b.bytes);
              base += b.count;
              written.push(...items);
              inFlight.push(tier.writeMany?.(items).then((r) => assert.ok(r.every((x) => x.status === 'fulfilled'))) ?? Promise.resolve());
              if (!b.together) {
                await Promise.all(inFlight);
                inFlight = [];
              }
            }
            await Promise.all(inFlight);
            for (const item of written) assert.ok(Buffer.from(await tier.read(item.id)).equals(item.bytes[0]), `value ${item.id}`);
            const { flushes, directFlushes } = tier.stats().details;
            direct += directFlushes;
            buffered += flushes - directFlushes;
            // Deleting every value deletes every segment, padding and all.
            for (const item of written) await tier.delete(item.id);
            await tier.idle();
            assert.equal(tier.stats().details.segmentFiles, 0);
          });
        },
      ),
      { numRuns: 15 },
    );
    assert.ok(direct > 0 && buffered > 0, `direct groups ${direct}, buffered groups ${buffered}`);
  });

  it('a group under the direct minimum is written buffered, with no padding', async () => {
    await withDiskTier({ segmentLanes: 1 }, async (tier, parent) => {
      const items = noiseItems(0, 3, 10 * KiB);
      assert.ok((await tier.writeMany?.(items))?.every((r) => r.status === 'fulfilled'));
      assert.ok(items.reduce((n, i) => n + i.byteLength, 0) < DIRECT_MIN_BYTES);
      assert.equal(tier.stats().details.directFlushes, 0);
      const [file] = await filesUnder([parent]);
      assert.equal(file.size, items.reduce((n, i) => n + i.byteLength, 0));
    });
  });

  it('directWrites: false writes every group buffered', async () => {
    await withDiskTier({ directWrites: false, segmentLanes: 1 }, async (tier, parent) => {
      const items = noiseItems(0, 64, 64 * KiB - 8);
      assert.ok((await tier.writeMany?.(items))?.every((r) => r.status === 'fulfilled'));
      assert.equal(tier.stats().details.directWrites, 0);
      assert.equal(tier.stats().details.directFlushes, 0);
      assert.equal(tier.directWritesOffReason, undefined, 'off as asked: nothing refused');
      const [file] = await filesUnder([parent]);
      assert.equal(file.size, items.reduce((n, i) => n + i.byteLength, 0));
    });
  });

  it('a direct write refused mid-run is written again buffered: no value fails, and direct writes stay off', async () => {
    await withDiskTier({}, async (tier) => {
      mock.method(DirectWrites.prototype, 'write', async function (this: DirectWrites) {
        this.turnOff('simulated');
        throw new DirectRefused('simulated');
      });
      const items = noiseItems(0, 64, 64 * KiB - 8);
      assert.ok((await tier.writeMany?.(items))?.every((r) => r.status === 'fulfilled'));
      assert.equal(tier.stats().details.directWrites, 0);
      assert.equal(tier.stats().details.directFlushes, 0);
      assert.equal(tier.directWritesOffReason, 'simulated');
      for (const item of items) assert.ok(Buffer.from(await tier.read(item.id)).equals(item.bytes[0]), `value ${item.id}`);
    });
  });

  it('a direct handle that cannot be opened this time (EMFILE) leaves the group to a buffered write, and the next group tries again', async () => {
    await withDiskTier({ segmentLanes: 1 }, async (tier) => {
      const open = fsp.open.bind(fsp);
      let refusals = 1;
      mock.method(fsp, 'open', async (file: string, flags: number | string, mode?: number) => {
        if (typeof flags === 'number' && (flags & constants.O_DIRECT) !== 0 && refusals-- > 0) {
          throw Object.assign(new Error('EMFILE: simulated'), { code: 'EMFILE' });
        }
        return open(file, flags, mode);
      });
      const first = noiseItems(0, 64, 64 * KiB - 8);
      assert.ok((await tier.writeMany?.(first))?.every((r) => r.status === 'fulfilled'));
      assert.equal(tier.stats().details.directFlushes, 0);
      assert.equal(tier.stats().details.directWrites, 1, 'not turned off: the failure was not a refusal');
      const second = noiseItems(100, 64, 64 * KiB - 8);
      assert.ok((await tier.writeMany?.(second))?.every((r) => r.status === 'fulfilled'));
      assert.equal(tier.stats().details.directFlushes, 1);
      for (const item of [...first, ...second]) assert.ok(Buffer.from(await tier.read(item.id)).equals(item.bytes[0]), `value ${item.id}`);
    });
  });

  it('a direct write that fails (EIO) fails its values, and the tier goes on writing', async () => {
    await withDiskTier({}, async (tier) => {
      const failing = mock.method(DirectWrites.prototype, 'write', async () => {
        throw Object.assign(new Error('EIO: simulated'), { code: 'EIO' });
      });
      const lost = noiseItems(0, 64, 64 * KiB - 8);
      const results = (await tier.writeMany?.(lost)) ?? [];
      assert.ok(results.length === 64 && results.every((r) => r.status === 'rejected'));
      for (const item of lost) await assert.rejects(tier.read(item.id), { code: 'SPW_ERR_TIER_MISSING' });
      assert.equal(tier.usage().count, 0);
      failing.mock.restore();
      const kept = noiseItems(100, 64, 64 * KiB - 8);
      assert.ok((await tier.writeMany?.(kept))?.every((r) => r.status === 'fulfilled'));
      for (const item of kept) assert.ok(Buffer.from(await tier.read(item.id)).equals(item.bytes[0]), `value ${item.id}`);
      assert.equal(tier.stats().details.directWrites, 1);
    });
  });
});
