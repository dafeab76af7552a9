import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test, type TestContext } from 'node:test';
import { SlowTier } from '../../src/testing/index.js';
import { sampleMemory } from '../../src/store/spill-store.js';
import { KiB, MiB, f64, openStore } from '../helpers/store.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait.js';
import { nodeImports, suiteModule } from '../helpers/suite.js';

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

/**
 * In a fresh process with nothing but the store to keep it alive, as an embedded user's:
 * 1 MiB values streamed through a store, the producer awaiting `whenResumed()` before
 * each, then read back and checked.
 */
const STREAM = `
const { SpillStore } = await import(process.argv[1]);
const [directory, count, memoryLimit] = [process.argv[2], Number(process.argv[3]), process.argv[4]];
const store = await SpillStore.open({ memoryLimit, monitorIntervalMs: 5, directory });
const baseline = process.memoryUsage.rss();
let pauses = 0;
store.on('pause', () => pauses++);
for (let i = 0; i < count; i++) {
  await store.whenResumed();
  store.set('k' + i, new Float64Array(131072).fill(i));
}
let bad = 0;
for (let i = 0; i < count; i++) {
  const value = await store.get('k' + i);
  if (value[131071] !== i) bad++;
  store.delete('k' + i);
}
await store.whenResumed();
const { diskWrites } = store.stats().counters;
await store.close();
console.log(JSON.stringify({ baseline, limit: store.memoryLimit, pauses, diskWrites, bad }));
`;

async function streamInChild(t: TestContext, memoryLimit: string, count: number) {
  const dir = await tempDir(t);
  const index = suiteModule('src/index');
  const args = [...nodeImports, '--input-type=module', '-e', STREAM, index, dir, String(count), memoryLimit];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const stalled = setTimeout(() => child.kill('SIGKILL'), 90_000);
  t.after(() => clearTimeout(stalled));
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
  assert.equal(signal, null, 'the producer stalled: killed after 90 s');
  assert.equal(code, 0, `exit code ${code} (13: the loop emptied while the producer awaited whenResumed)`);
  const result = JSON.parse(out) as { baseline: number; limit: number; pauses: number; diskWrites: number; bad: number };
  assert.ok(result.pauses > 0, 'the store paused');
  assert.ok(result.diskWrites >= count / 2, `spilled ${result.diskWrites} of ${count}`);
  assert.equal(result.bad, 0);
  return result;
}

test('a store whose limit is below the process baseline still streams values through', async (t) => {
  // The process's RSS alone is over the pause level: memory the store does not hold must
  // never keep its producers paused for good.
  const result = await streamInChild(t, '16 MiB', 48);
  assert.ok(result.baseline > 0.8 * result.limit, `baseline ${result.baseline} is over the pause level`);
});

test('a producer paused until the monitor spills keeps its process alive', async (t) => {
  // Values take RSS over the pause level; the monitor's reading spills part of them and the
  // producer waits for the next. With only the monitor's timer left, the process must not
  // exit mid-await (it did, with code 13, while that timer was unref'd).
  const result = await streamInChild(t, '192 MiB', 224);
  assert.ok(result.baseline < 0.6 * result.limit, `baseline ${result.baseline} is under the target`);
});
