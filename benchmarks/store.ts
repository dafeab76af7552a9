/**
 * `npm run bench -- store [--quick]`: SpillStore against references measured in the same
 * run (the machine is shared and noisy, so only ratios are meaningful).
 *   1. duplication: 16 concurrent gets of one spilled 256 MiB value (peak RSS growth)
 *   2. spill / unspill throughput of 32 MiB Float64Arrays vs plain fs write / read
 *   3. get / peek of in-memory keys vs Map.prototype.get
 *   4. event-loop delay while 2 GiB streams through a 256 MiB store on a 20 ms/op disk
 *   5. peak RSS while 2 GiB of 1 MiB values stream through a 256 MiB store (defaults; in a
 *      child process). `--no-collect` runs phases 4 and 5 with collectGarbage off.
 * Phase 2 lives in _store-throughput.ts, phase 5 in _store-rss.ts.
 */
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { DiskTier, SpillStore } from '../src/index.js';
import { SlowTier } from '../src/testing/index.js';
import { loadAverage } from './_cluster-common.js';
import { GiB, MiB, fill, fmt, gbps, gc, mismatches, rows, sleep, tick } from './_store-common.js';
import { rssBound } from './_store-rss.js';
import { throughput } from './_store-throughput.js';

/** Samples process RSS every `ms` from a worker thread, so a busy main loop cannot hide a peak. */
function rssSampler(ms: number): { stop: () => Promise<number> } {
  const code = `
    const { parentPort } = require('node:worker_threads');
    let peak = process.memoryUsage.rss();
    const t = setInterval(() => { peak = Math.max(peak, process.memoryUsage.rss()); }, ${ms});
    parentPort.on('message', () => { clearInterval(t); peak = Math.max(peak, process.memoryUsage.rss()); parentPort.postMessage(peak); });`;
  const worker = new Worker(code, { eval: true });
  return {
    stop: () =>
      new Promise<number>((resolve) => {
        worker.once('message', (peak: number) => void worker.terminate().then(() => resolve(peak)));
        worker.postMessage('stop');
      }),
  };
}

// ---- 1. duplication ------------------------------------------------------------------

/** Sets and spills one value; a separate frame so no stale reference to it survives. */
async function spillOne(store: SpillStore, key: string, bytes: number, seed: number): Promise<void> {
  const value = new Float64Array(bytes / 8);
  await fill(value, seed, 1024 * 1024);
  store.set(key, value);
  await store.evict();
}

async function duplication(parent: string, valueBytes: number): Promise<void> {
  const store = await SpillStore.open({ memoryLimit: 4 * valueBytes, directory: parent, monitorIntervalMs: 0 });
  try {
    await spillOne(store, 'big', valueBytes, 7);
    // Let the weak reference die so every get below has to go to disk.
    for (let i = 0; i < 5 && store.stats().detached.count > 0; i++) {
      gc();
      await sleep(20);
    }
    const detached = store.stats().detached.count;
    const readsBefore = store.stats().counters.diskReads;
    gc();
    await sleep(50);
    const sampler = rssSampler(5);
    await sleep(50);
    const before = process.memoryUsage.rss();
    const results = await Promise.all(Array.from({ length: 16 }, () => store.get('big')));
    const peak = Math.max(await sampler.stop(), process.memoryUsage.rss());
    const reads = store.stats().counters.diskReads - readsBefore;
    const same = results.every((r) => r === results[0]);
    const bad = await mismatches(results[0] as Float64Array, 7, 4 * 1024 * 1024);
    const growth = peak - before;
    const ratio = growth / valueBytes;
    console.log(
      `duplication: 16 gets of a ${valueBytes / MiB} MiB spilled value: peak RSS growth ${fmt(growth / MiB, 1)} MiB ` +
        `(${fmt(ratio)}x the value), all ===: ${same}, diskReads +${reads}, content ok: ${bad === 0}` +
        (detached > 0 ? ` (warning: ${detached} value still detached before the gets)` : ''),
    );
    rows.push({
      name: 'duplication (16 gets, 256 MiB)',
      reference: `${valueBytes / MiB} MiB value`,
      measured: `+${fmt(growth / MiB, 1)} MiB RSS, ===:${same}, reads:${reads}`,
      ratio: fmt(ratio),
      target: '<= 1.1',
      pass: ratio <= 1.1 && same && reads === 1 && bad === 0,
    });
  } finally {
    await store.close();
  }
}

// ---- 3. get / peek vs Map.get -----------------------------------------------------------

/** Best ns per call over `batches` timed batches of `iterations` calls (after a warm-up). */
function nsPerCall(fn: (iterations: number) => number, iterations: number, batches: number): { ns: number; sink: number } {
  let sink = fn(iterations); // warm-up: let the JIT optimise the loop
  let best = Infinity;
  for (let b = 0; b < batches; b++) {
    const t = performance.now();
    sink += fn(iterations);
    best = Math.min(best, ((performance.now() - t) * 1e6) / iterations);
  }
  return { ns: best, sink };
}

async function lookups(keyCount: number, iterations: number): Promise<void> {
  const store = await SpillStore.open({ memoryLimit: GiB, monitorIntervalMs: 0 });
  const map = new Map<string, unknown>();
  const keys = Array.from({ length: keyCount }, (_, i) => `key-${i}`);
  for (const [i, k] of keys.entries()) {
    const v = { i, payload: new Uint8Array(16) };
    store.set(k, v);
    map.set(k, v);
  }
  const mask = keyCount - 1; // keyCount is a power of two
  const mapGet = (n: number): number => {
    let s = 0;
    for (let i = 0; i < n; i++) if (map.get(keys[i & mask]) !== undefined) s++;
    return s;
  };
  const storePeek = (n: number): number => {
    let s = 0;
    for (let i = 0; i < n; i++) if (store.peek(keys[i & mask]) !== undefined) s++;
    return s;
  };
  const storeGet = (n: number): number => {
    let s = 0;
    for (let i = 0; i < n; i++) if (store.get(keys[i & mask]) !== undefined) s++;
    return s;
  };
  const batches = 15; // short batches: on a loaded machine the best one is the least preempted
  // Interleave the three so noise hits them alike; keep each one's best.
  const best = { map: Infinity, peek: Infinity, get: Infinity };
  let sink = 0;
  for (let r = 0; r < 3; r++) {
    for (const [name, fn] of [['map', mapGet], ['peek', storePeek], ['get', storeGet]] as const) {
      const m = nsPerCall(fn, iterations, batches);
      best[name] = Math.min(best[name], m.ns);
      sink += m.sink;
    }
    await tick();
  }
  // For information: the awaited cost (microtask hop included) on both sides.
  const awaited = async (get: (k: string) => unknown, n: number): Promise<number> => {
    let s = 0;
    const t = performance.now();
    for (let i = 0; i < n; i++) if ((await get(keys[i & mask])) !== undefined) s++;
    sink += s;
    return ((performance.now() - t) * 1e6) / n;
  };
  const awaitN = Math.floor(iterations / 4);
  const mapGetter = (k: string): unknown => map.get(k);
  const storeGetter = (k: string): Promise<unknown> => store.get(k);
  await awaited(mapGetter, awaitN);
  await awaited(storeGetter, awaitN);
  let awaitMap = Infinity;
  let awaitStore = Infinity;
  for (let r = 0; r < 3; r++) {
    awaitMap = Math.min(awaitMap, await awaited(mapGetter, awaitN));
    awaitStore = Math.min(awaitStore, await awaited(storeGetter, awaitN));
  }
  await store.close();
  if (sink === 0) console.log('(sink)');
  console.log(
    `lookups (${keyCount} keys, best of ${3 * batches} batches of ${iterations}): Map.get ${fmt(best.map, 1)} ns, ` +
      `peek ${fmt(best.peek, 1)} ns (${fmt(best.peek / best.map)}x), get ${fmt(best.get, 1)} ns (${fmt(best.get / best.map)}x); ` +
      `awaited: map ${fmt(awaitMap, 1)} ns, store ${fmt(awaitStore, 1)} ns (${fmt(awaitStore / awaitMap)}x, information only)`,
  );
  for (const name of ['peek', 'get'] as const) {
    rows.push({
      name: `${name} (in memory) vs Map.get`,
      reference: `Map.get ${fmt(best.map, 1)} ns`,
      measured: `${fmt(best[name], 1)} ns`,
      ratio: fmt(best[name] / best.map),
      target: '<= 3',
      pass: best[name] / best.map <= 3,
    });
  }
  rows.push({
    name: 'await get vs await Map.get (info)',
    reference: `${fmt(awaitMap, 1)} ns`,
    measured: `${fmt(awaitStore, 1)} ns`,
    ratio: fmt(awaitStore / awaitMap),
    target: '-',
    pass: true,
  });
}

// ---- 4. event-loop delay on a slow disk ---------------------------------------------------

/** whenResumed(), or false after `ms` (a paused store may wait on RSS that never drops). */
async function resumedWithin(store: SpillStore, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([store.whenResumed().then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function eventLoop(parent: string, totalBytes: number, valueBytes: number, limit: number, monitorIntervalMs: number, collectGarbage: boolean): Promise<void> {
  const tier = new SlowTier(new DiskTier({ directory: parent }), 20);
  // collectGarbage is on by default with the monitor: false shows what its collections cost the loop.
  const store = await SpillStore.open({ memoryLimit: limit, tiers: [tier], monitorIntervalMs, ...(collectGarbage ? {} : { collectGarbage: false }) });
  let pauses = 0;
  store.on('pause', () => pauses++);
  store.on('error', (err: unknown) => console.log(`  store error: ${String(err)}`));
  const count = Math.floor(totalBytes / valueBytes);
  // A delay monitor records the gaps between its ticks: with 1 ms ticks its max bounds the
  // longest block within 1 ms (10 ms ticks read up to 10 ms above it).
  const resolution = 1;
  // Reference: the same histogram over an idle 3 s, i.e. what the shared machine alone adds.
  const idle = monitorEventLoopDelay({ resolution });
  idle.enable();
  await sleep(3000);
  idle.disable();
  const idleMax = idle.max / 1e6;
  const histogram = monitorEventLoopDelay({ resolution });
  const elu0 = performance.eventLoopUtilization();
  let peakResident = 0;
  let bad = 0;
  let stalled: string | undefined;
  const t0 = performance.now();
  histogram.enable();
  try {
    for (let i = 0; i < count; i++) {
      if (store.paused && !(await resumedWithin(store, 15_000))) {
        const st = store.stats();
        stalled = `stalled at value ${i}: paused for 15 s with ${fmt(store.residentBytes / MiB, 0)} MiB resident, RSS ${fmt(st.process.rss / MiB, 0)} MiB`;
        break;
      }
      const value = new Float64Array(valueBytes / 8);
      await fill(value, i);
      store.set(`v${i}`, value);
      peakResident = Math.max(peakResident, store.residentBytes);
    }
    const tWrite = performance.now();
    if (stalled !== undefined) {
      console.log(`event loop (monitor ${monitorIntervalMs} ms): ${stalled}`);
      rows.push({ name: 'event-loop delay', reference: '-', measured: stalled, ratio: '-', target: 'max < 50 ms', pass: false });
      return;
    }
    for (let i = 0; i < count; i++) bad += await mismatches((await store.get(`v${i}`)) as Float64Array, i);
    const tRead = performance.now();
    histogram.disable();
    const elu = performance.eventLoopUtilization(elu0).utilization;
    const maxMs = histogram.max / 1e6;
    const p99Ms = histogram.percentile(99) / 1e6;
    const c = store.stats().counters;
    console.log(
      `event loop: ${fmt(count * valueBytes / GiB)} GiB through a ${limit / MiB} MiB store on a 20 ms/op disk ` +
        `(monitor ${monitorIntervalMs} ms): write ${fmt(gbps(count * valueBytes, tWrite - t0))} GB/s, read ${fmt(gbps(count * valueBytes, tRead - tWrite))} GB/s; ` +
        `delay max ${fmt(maxMs, 1)} ms (idle process: ${fmt(idleMax, 1)} ms), p99 ${fmt(p99Ms, 1)} ms (1 ms monitor), ELU ${fmt(elu)}; pauses ${pauses}, peak resident ${fmt(peakResident / MiB, 0)} MiB, ` +
        `diskWrites ${c.diskWrites}, diskReads ${c.diskReads}, verified: ${bad === 0 ? 'ok' : `${bad} bad elements`}`,
    );
    rows.push({
      name: `event-loop delay (${fmt(count * valueBytes / GiB)} GiB, ${limit / MiB} MiB, 20 ms disk)`,
      reference: `idle max ${fmt(idleMax, 1)} ms`,
      measured: `max ${fmt(maxMs, 1)} ms, p99 ${fmt(p99Ms, 1)} ms, ELU ${fmt(elu)}`,
      ratio: '-',
      target: 'max < 50 ms',
      pass: maxMs < 50 && bad === 0,
    });
  } finally {
    histogram.disable();
    await store.close();
  }
}

// ---- main ---------------------------------------------------------------------------------

export default async function storeBenchmarks(args: string[]): Promise<void> {
  const quick = args.includes('--quick');
  const only = args.filter((a) => !a.startsWith('--'));
  const run = (name: string): boolean => only.length === 0 || only.includes(name);
  if ((globalThis as { gc?: unknown }).gc === undefined) console.log('note: run with --expose-gc (npm run bench does) for stable memory figures');
  const parent = await fsp.mkdtemp(path.join(os.tmpdir(), 'spillway-bench-'));
  const started = performance.now();
  console.log(`store benchmarks on ${os.cpus().length} cores, node ${process.version}, ${new Date().toISOString()}, load ${loadAverage()}${quick ? ' (quick)' : ''}`);
  try {
    if (run('duplication')) await duplication(parent, quick ? 64 * MiB : 256 * MiB);
    gc();
    if (run('throughput')) await throughput(parent, quick ? 8 : 32, 32 * MiB, 3);
    gc();
    if (run('lookups')) await lookups(1024, quick ? 250_000 : 500_000);
    gc();
    if (run('eventloop')) {
      // The store's defaults: the RSS monitor runs every 100 ms. `--no-monitor` turns it off.
      const monitor = args.includes('--no-monitor') ? 0 : 100;
      await eventLoop(parent, quick ? 512 * MiB : 2 * GiB, 8 * MiB, 256 * MiB, monitor, !args.includes('--no-collect'));
    }
    gc();
    if (run('rss')) await rssBound(parent, quick ? 512 * MiB : 2 * GiB, 1 * MiB, 256 * MiB, !args.includes('--no-collect'));
  } finally {
    await fsp.rm(parent, { recursive: true, force: true });
  }
  console.log(`\nStore benchmarks (${fmt((performance.now() - started) / 1000, 1)} s, load average now ${loadAverage()})`);
  console.table(rows.map((r) => ({ ...r, pass: r.pass ? 'PASS' : 'FAIL' })));
}
