import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DiskTier, type DiskTierOptions } from '../../src/tiers/disk/disk-tier.js';
import { noise } from '../../src/testing/sources.js';
import { withTempDir } from '../helpers/temp-dir.js';

export { collect, encodedSource, entriesUnder, failingSource, filesUnder, noise, randomWalk, rawSource, slowSource } from '../../src/testing/sources.js';

export async function tempDir(prefix = 'spw-test-'): Promise<string> {
  return fsp.mkdtemp(path.join(os.tmpdir(), prefix));
}

// One fixture for a folder removed when its body settles, shared with the other suites.
export { withTempDir } from '../helpers/temp-dir.js';

/** Runs `body` with an open DiskTier in a fresh directory, then closes it and removes the directory. */
export async function withDiskTier(options: Omit<DiskTierOptions, 'directory' | 'directories'>, body: (tier: DiskTier, parent: string) => Promise<void>): Promise<void> {
  await withTempDir(async (parent) => {
    const tier = new DiskTier({ ...options, directory: parent });
    await tier.open();
    try {
      await body(tier, parent);
    } finally {
      await tier.close();
    }
  });
}

/** `count` items of random bytes, `bytes` long plus i (so no two share a length), with ids from `base`: a writeMany batch. */
export function noiseItems(base: number, count: number, bytes: number): { id: number; bytes: Uint8Array[]; byteLength: number }[] {
  return Array.from({ length: count }, (_, i) => {
    const v = noise(bytes + i);
    return { id: base + i, bytes: [v], byteLength: v.byteLength };
  });
}
