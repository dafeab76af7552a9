import { DiskTier, type DiskTierOptions } from '../../src/tiers/disk/disk-tier.js';
import { noise } from '../../src/testing/sources.js';
import { type CleanupOwner, onCleanup, withCleanup } from '../helpers/cleanup.js';
import { tempDir } from '../helpers/temp-dir.js';

export { collect, encodedSource, entriesUnder, failingSource, filesUnder, noise, randomWalk, rawSource, slowSource } from '../../src/testing/sources.js';

export { tempDir, withTempDir } from '../helpers/temp-dir.js';

/** An open DiskTier in a fresh directory, closed (then the directory removed) when the test or scope ends. */
export async function openDiskTier(owner: CleanupOwner, options: Omit<DiskTierOptions, 'directory' | 'directories'> = {}): Promise<DiskTier> {
  const tier = new DiskTier({ ...options, directory: await tempDir(owner) });
  await tier.open();
  onCleanup(owner, () => tier.close());
  return tier;
}

/** Runs `body` with an open DiskTier in a fresh directory, then closes it and removes the directory: for the runs of a property. */
export function withDiskTier(options: Omit<DiskTierOptions, 'directory' | 'directories'>, body: (tier: DiskTier, parent: string) => Promise<void>): Promise<void> {
  return withCleanup(async (scope) => {
    const parent = await tempDir(scope);
    const tier = new DiskTier({ ...options, directory: parent });
    await tier.open();
    onCleanup(scope, () => tier.close());
    await body(tier, parent);
  });
}

/** `count` items of random bytes, `bytes` long plus i (so no two share a length), with ids from `base`: a writeMany batch. */
export function noiseItems(base: number, count: number, bytes: number): { id: number; bytes: Uint8Array[]; byteLength: number }[] {
  return Array.from({ length: count }, (_, i) => {
    const v = noise(bytes + i);
    return { id: base + i, bytes: [v], byteLength: v.byteLength };
  });
}
