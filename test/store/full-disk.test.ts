/** A spill disk that stays full (ENOSPC): one `unspillable` per episode, and no wait on writes that cannot succeed (issue 33, item 3). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TierWriteError } from '../../src/index.js';
import { FaultyTier, type FaultPlan } from '../../src/testing/index.js';
import { KiB, MiB, f64, openStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';

test('a disk that stays full: unspillable fires once per episode, not at every retry', async (t) => {
  let full = true;
  const plan: FaultPlan = { failWrite: () => (full ? 'ENOSPC' : undefined) };
  const { store } = await openStore(t, { memoryLimit: 4 * MiB, retryDelayMs: 20, wrap: (disk) => new FaultyTier(disk, plan) });
  store.on('error', () => undefined);
  const events: Array<{ reason: string }> = [];
  store.on('unspillable', (event: { reason: string }) => events.push(event));
  for (let i = 0; i < 48; i++) store.set(`a${i}`, f64(64 * KiB, i)); // 3 MiB, over the target
  // About 25 rounds of retries, every one failing again.
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.ok(store.stats().counters.writeErrors > 48, `writes were retried (${store.stats().counters.writeErrors} failures)`);
  assert.deepEqual(events.map((e) => e.reason), ['write-failures']);
  assert.ok(store.writeFailure instanceof TierWriteError);
  assert.match(store.writeFailure.message, /ENOSPC/);
  // The disk has room again: writes land, memory goes back under target, the episode ends.
  full = false;
  // Enough retried writes have to land (not just the first) for memory to get back under
  // target, which is what ends the episode.
  await waitFor(() => {
    const stats = store.stats();
    return store.writeFailure === undefined && stats.memory.bytes + stats.spilling.bytes <= stats.targetBytes;
  }, 'the retried writes to land', 10_000);
  await store.evict();
  full = true;
  for (let i = 0; i < 48; i++) store.set(`b${i}`, f64(64 * KiB, i));
  await waitFor(() => events.length === 2, 'a second episode', 10_000);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal(events.length, 2);
});

test('a disk that stays full: deleting values ends the episode, and the next one is reported', async (t) => {
  const plan: FaultPlan = { failWrite: () => 'ENOSPC' };
  const { store } = await openStore(t, { memoryLimit: 4 * MiB, retryDelayMs: 20, wrap: (disk) => new FaultyTier(disk, plan) });
  store.on('error', () => undefined);
  const events: Array<{ reason: string }> = [];
  store.on('unspillable', (event: { reason: string }) => events.push(event));
  for (let i = 0; i < 48; i++) store.set(`a${i}`, f64(64 * KiB, i));
  await waitFor(() => events.length === 1, 'the first episode', 10_000);
  // Memory gets under target by deletes alone: no write lands and the pump has nothing to do.
  for (let i = 0; i < 48; i++) store.delete(`a${i}`);
  assert.equal(store.stats().memory.bytes, 0);
  for (let i = 0; i < 48; i++) store.set(`b${i}`, f64(64 * KiB, i));
  await waitFor(() => events.length === 2, 'a second episode', 10_000);
  assert.deepEqual(events.map((e) => e.reason), ['write-failures', 'write-failures']);
});

test('a full disk does not keep producers paused while the values fit the memory limit', async (t) => {
  const plan: FaultPlan = { failWrite: () => 'ENOSPC' };
  const { store } = await openStore(t, { memoryLimit: 4 * MiB, retryDelayMs: 1_000, wrap: (disk) => new FaultyTier(disk, plan) });
  store.on('error', () => undefined);
  // 3.5 MiB: over pause (80 %), under the limit.
  for (let i = 0; i < 56; i++) store.set(`k${i}`, f64(64 * KiB, i));
  await waitFor(() => store.cannotSpill, 'every write to have failed', 10_000);
  assert.equal(store.paused, false, 'not paused on writes that cannot succeed');
  await store.whenResumed();
  // Over the limit there is no room left at all: producers are paused.
  for (let i = 56; i < 72; i++) store.set(`k${i}`, f64(64 * KiB, i));
  await waitFor(() => store.cannotSpill, 'the new writes to have failed', 10_000);
  assert.equal(store.paused, true);
  for (let i = 0; i < 72; i++) assert.equal(store.where(`k${i}`), 'memory', 'no value lost');
});
