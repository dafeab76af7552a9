/** DiskTier's fault paths: a failed open, a batch before open, a compressed chunk that no longer decodes. */
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { TierCorruptError, TierNotOpenError } from '../../src/errors.js';
import { DiskTier } from '../../src/tiers/disk/disk-tier.js';
import { packedWritesOf } from '../../src/tiers/packed.js';
import { filesUnder, openDiskTier, randomWalk, rawSource, tempDir } from './helpers.js';

const KiB = 1024;

describe('DiskTier fault paths', () => {
  it('an open() that fails on its second parent removes the folder it made in the first', async (t) => {
    const parent = await tempDir(t);
    const blocker = path.join(parent, 'a-file');
    await fsp.writeFile(blocker, 'x');
    const good = path.join(parent, 'good');
    // The second parent is under a regular file: mkdir fails with ENOTDIR.
    const tier = new DiskTier({ directories: [good, path.join(blocker, 'sub')] });
    await assert.rejects(tier.open(), (err: NodeJS.ErrnoException) => err.code === 'ENOTDIR');
    await tier.close();
    assert.deepEqual(await fsp.readdir(good), []);
  });

  it('writeMany and a packed batch before open() reject with TierNotOpenError; they never throw', async (t) => {
    const parent = await tempDir(t);
    const tier = new DiskTier({ directory: parent });
    let many: Promise<unknown> | undefined;
    let packed: Promise<unknown> | undefined;
    assert.doesNotThrow(() => {
      many = tier.writeMany?.([{ id: 1, bytes: [Buffer.alloc(8)], byteLength: 8 }]);
      packed = packedWritesOf(tier)?.write({ ids: [2], lengths: [8], pieces: [Buffer.alloc(8)], byteLength: 8 });
    }, 'every Tier method is asynchronous');
    await assert.rejects(many as Promise<unknown>, TierNotOpenError);
    await assert.rejects(packed as Promise<unknown>, TierNotOpenError);
  });

  for (const smallValueBytes of [0, 1024 * KiB]) {
    it(`a compressed chunk that lz4 cannot decode fails that read with TierCorruptError (${smallValueBytes === 0 ? 'a file of its own' : 'fused'})`, async (t) => {
      const tier = await openDiskTier(t, { compression: 'lz4', smallValueBytes });
      const value = Buffer.from(randomWalk(32 * KiB).buffer); // 256 KiB, compressible
      await tier.write(1, rawSource(value), value.byteLength);
      const other = Buffer.alloc(100, 9);
      await tier.write(2, rawSource(other), other.byteLength);
      const [file] = (await filesUnder([tier.directory])).map((f) => f.path);
      const handle = await fsp.open(file, 'r+');
      await handle.write(Buffer.alloc(64, 0xff), 0, 64, 5);
      await handle.close();
      await assert.rejects(tier.read(1), TierCorruptError);
      if (smallValueBytes === 0) assert.ok(Buffer.from(await tier.read(2)).equals(other), 'the other value is untouched');
    });
  }
});
