import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SlowTier } from '../../src/testing/index.js';
import { sampleMemory } from '../../src/store/spill-store.js';
import { KiB, MiB, f64, openStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';

test('producers that outrun the disk are paused, then resumed once memory is back under the resume level', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 1 * MiB, wrap: (disk) => new SlowTier(disk, 30) });
  const events: string[] = [];
  store.on('pause', () => events.push('pause'));
  store.on('resume', () => events.push('resume'));
  let peak = 0;
  for (let i = 0; i < 32; i++) {
    store.set(`k${i}`, f64(64 * KiB, i));
    peak = Math.max(peak, store.residentBytes);
    if (store.paused) {
      assert.equal(store.stats().paused, true);
      await store.whenResumed();
      assert.ok(store.residentBytes <= store.resumeBytes, `resumed at ${store.residentBytes}, resume level ${store.resumeBytes}`);
    }
  }
  await store.flush();
  assert.ok(events.filter((e) => e === 'pause').length >= 1);
  assert.equal(events.at(-1), 'resume');
  // Backpressure, not memory growth: the store never went far past the pause level.
  assert.ok(peak <= 0.8 * MiB + 64 * KiB + 64, `peak ${peak}`);
  for (let i = 0; i < 32; i++) assert.equal(((await store.get(`k${i}`)) as Float64Array)[0], i);
});

test('the memory monitor spills LRU and pauses when process memory is over the limits', async (t) => {
  // A limit just above this process's RSS: RSS is over spill (0.7) and pause (0.8).
  // The monitor's timer is unref'd (it never keeps a process alive): hold the loop open.
  const keepAlive = setInterval(() => undefined, 1000);
  t.after(() => clearInterval(keepAlive));
  const rss = process.memoryUsage.rss();
  const { store } = await openStore(t, { memoryLimit: Math.floor(rss / 0.85), monitorIntervalMs: 10 });
  const paused = new Promise<unknown>((resolve) => store.once('pause', resolve));
  for (let i = 0; i < 4; i++) store.set(`k${i}`, f64(64 * KiB, i));
  const unspillable = new Promise<{ reason: string; rss?: number }>((resolve) => store.once('unspillable', resolve));
  const info = (await paused) as { rss: number };
  assert.ok(info.rss > 0);
  await waitFor(() => store.stats().disk.count === 4, 'monitor spill');
  for (let i = 0; i < 4; i++) assert.equal(store.where(`k${i}`), 'disk');
  // RSS stays over the pause level, but nothing is left to spill: pausing cannot help, so
  // the store resumes and says why instead of stalling its producers forever.
  await store.whenResumed();
  const event = await unspillable;
  assert.equal(event.reason, 'unmanaged');
  assert.ok((event.rss ?? 0) > store.memoryLimit * 0.8);
  assert.equal(((await store.get('k2')) as Float64Array)[0], 2);
});

test('with a roomy limit the monitor does nothing', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 64 * 1024 * MiB, monitorIntervalMs: 10 });
  store.set('k', f64(64 * KiB, 1));
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(store.paused, false);
  assert.equal(store.where('k'), 'memory');
  assert.equal(store.stats().counters.diskWrites, 0);
});

test('pause and target can be disabled', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 64 * KiB, target: false, pause: false });
  for (let i = 0; i < 8; i++) store.set(`k${i}`, f64(64 * KiB, i));
  await store.flush();
  assert.equal(store.paused, false);
  assert.equal(store.stats().memory.count, 8);
});

test('a store paused with RSS between target and spill keeps spilling until it can resume', async (t) => {
  // The monitor is on (so RSS counts) but its timer never fires: the test feeds readings.
  // No collector: a collection would leave spilling to a next reading that never comes.
  const { store } = await openStore(t, {
    memoryLimit: 100 * MiB,
    monitorIntervalMs: 2_000_000_000,
    collectGarbage: false,
    wrap: (disk) => new SlowTier(disk, 20),
  });
  store.set('a', f64(30 * MiB, 1));
  store.set('b', f64(10 * MiB, 2));
  store[sampleMemory](85 * MiB); // over pause (80): pause, and spill 25 MiB worth (a)
  assert.equal(store.paused, true);
  await store.flush();
  assert.equal(store.where('a'), 'disk');
  assert.equal(store.where('b'), 'memory');
  await new Promise((resolve) => setImmediate(resolve)); // the first round is over
  // 65 MiB: under spill (70) but over target (60), and b could still go. Before the fix
  // nothing spilled it and nothing resumed the store: its producers waited forever.
  store[sampleMemory](65 * MiB);
  await store.flush();
  assert.equal(store.where('b'), 'disk');
  assert.equal(store.paused, false);
});

test('a store whose limit is below the process baseline still streams values through', async (t) => {
  // This process's RSS alone is over the pause level: memory the store does not hold must
  // never keep its producers paused, or the loop below would stall instead of finishing.
  const keepAlive = setInterval(() => undefined, 1000);
  t.after(() => clearInterval(keepAlive));
  const limit = 16 * MiB;
  assert.ok(process.memoryUsage.rss() > 0.8 * limit, 'the baseline is over the pause level');
  const { store } = await openStore(t, { memoryLimit: limit, monitorIntervalMs: 5 });
  const count = 48;
  let stalled: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    stalled = setTimeout(() => reject(new Error(`producer stalled: paused ${store.paused}, ${JSON.stringify(store.stats().memory)} in memory`)), 60_000);
  });
  t.after(() => clearTimeout(stalled));
  const produce = async (): Promise<void> => {
    for (let i = 0; i < count; i++) {
      await store.whenResumed();
      store.set(`k${i}`, f64(1 * MiB, i));
    }
  };
  await Promise.race([produce(), deadline]);
  await Promise.race([store.flush(), deadline]);
  assert.ok(store.stats().counters.diskWrites >= count - 16, `spilled ${store.stats().counters.diskWrites}`);
  for (let i = 0; i < count; i++) {
    const value = (await Promise.race([store.get(`k${i}`), deadline])) as Float64Array;
    assert.equal(value[1], i + 1 / 1e6);
    store.delete(`k${i}`);
  }
  await Promise.race([store.whenResumed(), deadline]);
  assert.equal(store.paused, false);
});
