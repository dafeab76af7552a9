import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { DiskTier, SpillStore, type SpillStoreOptions, type Tier } from '../../src/index.js';
import { checkInvariants } from '../../src/store/spill-store.js';
import { onCleanup } from './cleanup.js';
import { tempDir } from './temp-dir.js';
import { OWNER_FILE } from '../../src/folders/owner.js';

export const KiB = 1024;
export const MiB = 1024 * 1024;


/**
 * A store on a tiny memory limit with the RSS monitor off (the test process's own RSS
 * would otherwise dwarf the limit), closed when the test ends.
 */
export async function openStore(
  t: TestContext,
  options: SpillStoreOptions & { wrap?: (disk: DiskTier) => Tier; diskCapacity?: number } = {},
): Promise<{ store: SpillStore; dir: string; disk: DiskTier }> {
  const dir = await tempDir(t);
  const { wrap, diskCapacity, ...rest } = options;
  const disk = new DiskTier({ directory: dir, capacity: diskCapacity });
  const store = await SpillStore.open({
    memoryLimit: 1 * MiB,
    monitorIntervalMs: 0,
    tiers: [wrap ? wrap(disk) : disk],
    ...rest,
  });
  onCleanup(t, () => store.close());
  return { store, dir, disk };
}

/** A Float64Array of `bytes` bytes whose contents identify `seed`. */
export function f64(bytes: number, seed: number): Float64Array {
  const a = new Float64Array(bytes / 8);
  for (let i = 0; i < a.length; i++) a[i] = seed + i / 1e6;
  return a;
}

/** Files (recursively) under a directory. */
export async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fsp.readdir(dir, { withFileTypes: true, recursive: true })) {
    // The owner file says whose folder it is (src/folders): not a spilled byte.
    if (e.isFile() && e.name !== OWNER_FILE) out.push(path.join(e.parentPath ?? e.path, e.name));
  }
  return out;
}

export function nextTick(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * After a batch write failed for `values` (set as k0, k1...), checked by the caller: no
 * file is left and the store's invariants hold; once `heal()` lets writes through and the
 * retry delay (at most 40 ms) has passed, they all spill and read back equal.
 */
export async function assertSpillsOnRetry(store: SpillStore, dir: string, values: readonly unknown[], heal: () => void): Promise<void> {
  assert.deepEqual(await filesUnder(dir), [], 'a failed batch leaves no file');
  assert.deepEqual(store[checkInvariants](), []);
  heal();
  await new Promise((resolve) => setTimeout(resolve, 40));
  assert.ok((await store.evict()) > 0);
  for (let i = 0; i < values.length; i++) assert.equal(store.where(`k${i}`), 'disk');
  for (let i = 0; i < values.length; i++) assert.deepEqual(await store.get(`k${i}`), values[i]);
}
