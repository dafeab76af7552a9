/**
 * `npm run bench -- tiers [--quick]`: the tiers alone, against references measured in the
 * same run (the machine is shared and noisy, so ratios matter more than speeds).
 *   1b. (first) 100,000 values of 4 KiB spilled through a SpillStore: fused segment files vs
 *      one file per value vs 32 MiB values, in rounds after a warm-up (the measure),
 *      with the kernel alone writing the same bytes, and a bare loop without a store, as floors
 *   1. the same values written then read by the tier alone: fused segment files (256 writes
 *      at a time, and writeMany calls of 1024) vs one file per value, and vs 32 MiB values
 *   2. compressible numbers (a rounded random walk): compressed memory, disk lz4 and auto,
 *      vs uncompressed disk: bytes stored and time side by side
 *   3. event-loop delay while the compressed memory tier writes and reads 64 MiB values, beside
 *      the loop idle, and idle while another thread pages in as many bytes
 * Phase 1b lives in _tiers-spill.ts.
 */
import { once as eventOnce } from 'node:events';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type IntervalHistogram, PerformanceObserver, constants as perfConstants, monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { SpillStore } from '../src/store/spill-store.js';
import { CompressedMemoryTier, DiskTier, type Tier, type WriteSource } from '../src/tiers/index.js';
import { KiB, MiB, batches, fmt, gc, mbps, once, pool, settle } from './_tiers-common.js';
import { storePhase } from './_tiers-spill.js';

function randomWalkBytes(bytes: number, seed: number): Buffer {
  const a = new Float64Array(bytes / 8);
  let x = 0;
  let s = seed;
  for (let i = 0; i < a.length; i++) {
    s = (s * 1103515245 + 12345) % 2147483648;
    x += s / 2147483648 - 0.5;
    a[i] = Math.round(x * 100) / 100;
  }
  return Buffer.from(a.buffer);
}

interface Run {
  writeMs: number;
  readMs: number;
  bytes: number;
  stored: number;
}

/** Writes value i under id i, `perCall` values per writeMany call, one call at a time (as the store hands batches over). */
async function writeInBatches(tier: Tier, values: Uint8Array[], perCall: number): Promise<void> {
  if (tier.writeMany === undefined) throw new Error(`tier ${tier.name} has no writeMany`);
  for (let from = 0; from < values.length; from += perCall) {
    const items = values.slice(from, from + perCall).map((bytes, k) => ({ id: from + k, bytes: [bytes], byteLength: bytes.byteLength }));
    const failed = (await tier.writeMany(items)).find((r) => r.status === 'rejected');
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
  }
}

/**
 * Writes then reads every value, `concurrency` calls at a time; with `perCall`, writes go
 * through writeMany instead, that many values per call.
 */
async function writeRead(
  tier: Tier,
  values: Uint8Array[],
  source: (b: Uint8Array) => WriteSource,
  concurrency: number,
  collect = true,
  perCall?: number,
): Promise<Run> {
  await tier.open();
  try {
    const total = values.reduce((s, v) => s + v.byteLength, 0);
    // A forced full GC inside an event-loop measurement would be measured too.
    if (collect) gc();
    let t = performance.now();
    if (perCall !== undefined) await writeInBatches(tier, values, perCall);
    else await pool(values.length, concurrency, (i) => tier.write(i, source(values[i]), values[i].byteLength));
    const writeMs = performance.now() - t;
    const stored = tier.usage().bytes;
    t = performance.now();
    let check = 0;
    await pool(values.length, concurrency, async (i) => {
      const back = await tier.read(i);
      check += back.byteLength;
    });
    const readMs = performance.now() - t;
    if (check !== total) throw new Error(`read back ${check} of ${total} bytes`);
    return { writeMs, readMs, bytes: total, stored };
  } finally {
    await tier.close();
  }
}

function line(label: string, r: Run): string {
  return `${label.padEnd(34)} write ${fmt(mbps(r.bytes, r.writeMs), 0).padStart(6)} MB/s (${fmt(r.writeMs / 1000)} s)  read ${fmt(mbps(r.bytes, r.readMs), 0).padStart(6)} MB/s (${fmt(r.readMs / 1000)} s)  stored ${fmt(r.stored / MiB, 1)} MiB`;
}

/** Pushes `count` values through a 64 MiB store on `tiers`, then reads them all back. */
async function chainRun(tiers: Tier[], sources: Buffer[], count: number): Promise<{ diskWritten: number; writeMs: number; readMs: number }> {
  const store = await SpillStore.open({ memoryLimit: 64 * MiB, monitorInterval: 0, tiers });
  try {
    const start = performance.now();
    for (let i = 0; i < count; i++) {
      const src = sources[i % sources.length];
      store.set(`k${i}`, new Float64Array(src.buffer.slice(src.byteOffset, src.byteOffset + src.byteLength)));
      if (store.paused) await store.whenResumed();
    }
    await store.evict();
    await store.flush();
    const writeMs = performance.now() - start;
    gc();
    const readStart = performance.now();
    for (let i = 0; i < count; i++) {
      const value = (await store.get(`k${i}`)) as Float64Array;
      if (value.byteLength !== sources[i % sources.length].byteLength) throw new Error(`k${i} came back with the wrong size`);
      store.delete(`k${i}`);
    }
    const readMs = performance.now() - readStart;
    const disk = store.stats().tiers.find((t) => t.name === 'disk');
    return { diskWritten: disk?.bytesAfterCompression ?? disk?.bytes ?? 0, writeMs, readMs };
  } finally {
    await store.close();
    gc();
  }
}

/**
 * The event loop, idle, while a worker thread allocates `count` buffers of `bytes` and writes
 * to every page of each (then drops it): what paging the values in costs the loop on this
 * host whoever does it. On this VM a thread faulting pages in stalls the others
 * (docs/benchmarks.md, twentieth session).
 */
async function pagingReference(count: number, bytes: number): Promise<IntervalHistogram & { ms: number }> {
  const worker = new Worker(
    `const { parentPort, workerData: { count, bytes } } = require('node:worker_threads');
     for (let i = 0; i < count; i++) { const b = new Uint8Array(bytes); for (let p = 0; p < bytes; p += 4096) b[p] = 1; }
     parentPort.postMessage('done');`,
    { eval: true, workerData: { count, bytes } },
  );
  await eventOnce(worker, 'online');
  const monitor = monitorEventLoopDelay({ resolution: 1 });
  monitor.enable();
  const start = performance.now();
  await eventOnce(worker, 'message');
  monitor.disable();
  const ms = performance.now() - start;
  await worker.terminate();
  return Object.assign(monitor, { ms });
}

export default async function tiers(args: string[]): Promise<void> {
  const quick = args.includes('--quick');
  const parent = await fsp.mkdtemp(path.join(os.tmpdir(), 'spw-bench-tiers-'));
  try {
    console.log(`tiers benchmark, ${os.cpus().length} cores, load average ${os.loadavg().map((x) => fmt(x, 1)).join(' ')}`);
    // Huge pages for malloc halve the time of large values here (docs/configuration.md).
    console.log(`   GLIBC_TUNABLES: ${process.env.GLIBC_TUNABLES ?? '(unset: malloc uses 4 KiB pages unless transparent huge pages are "always")'}`);
    const count = quick ? 10_000 : 100_000;
    const largeCount = quick ? 4 : 12;
    // Five rounds: fused is now bound by the main thread, and a round where the host slows the
    // CPU (the bare loop 2x its usual time) moves a median of three.
    await storePhase(parent, count, largeCount, quick ? 1 : 5);

    // 1. Small values, the tier alone.
    const small = Buffer.alloc(4 * KiB, 7);
    const smallValues = Array.from({ length: count }, () => small);
    console.log(`\n1. ${count} values of 4 KiB (${fmt((count * 4) / 1024, 0)} MiB), 256 in flight; fused values are read from the disk (their segments were written direct), the others from the page cache`);
    // One file per value runs last, then the disk gets a pause: run right after it (its
    // 100,000 files deleted, on a disk mounted with online discard), the writeMany row took
    // 1.55 and 1.76 s, slower than the 256 concurrent writes before it, where alone it took
    // 0.4-0.7 s against their 1.2-2.0 s.
    const fused = await writeRead(new DiskTier({ directory: parent }), smallValues, once, 256);
    console.log(line('fused segment files', fused));
    const batched = await writeRead(new DiskTier({ directory: parent }), smallValues, once, 256, true, 1024);
    console.log(line('fused, writeMany of 1024 values', batched));
    const large = randomWalkBytes(32 * MiB, 3);
    const largeRun = await writeRead(new DiskTier({ directory: parent }), Array.from({ length: largeCount }, () => large), batches, 2);
    console.log(line(`${largeCount} values of 32 MiB`, largeRun));
    const perFile = await writeRead(new DiskTier({ directory: parent, smallValueBytes: 0 }), smallValues, once, 256);
    console.log(line('one file per value', perFile));
    await settle();
    const fusedVsFile = perFile.writeMs / fused.writeMs;
    const fusedVsLarge = mbps(fused.bytes, fused.writeMs) / mbps(largeRun.bytes, largeRun.writeMs);
    console.log(`   fused vs file per value, the tier alone: write ${fmt(fusedVsFile, 1)}x, read ${fmt(perFile.readMs / fused.readMs, 1)}x (the issue's targets are checked through a store, in 1b)`);
    console.log(`   fused writeMany vs file per value: write ${fmt(perFile.writeMs / batched.writeMs, 1)}x`);
    console.log(`   fused vs 32 MiB values, the tier alone, write throughput: ${fmt(fusedVsLarge)}; read: ${fmt(mbps(fused.bytes, fused.readMs) / mbps(largeRun.bytes, largeRun.readMs))} (1b checks the target, spilling through a store)`);

    // 2. Compression on numbers.
    const numCount = quick ? 4 : 8;
    const walks = Array.from({ length: numCount }, (_, i) => randomWalkBytes(32 * MiB, i + 11));
    console.log(`\n2. ${numCount} values of 32 MiB of rounded random walk (Float64Array, 2 decimals)`);
    const none = await writeRead(new DiskTier({ directory: parent }), walks, batches, 2);
    console.log(line('disk, no compression', none));
    const lz4 = await writeRead(new DiskTier({ directory: parent, compression: 'lz4' }), walks, batches, 2);
    console.log(line('disk, lz4', lz4));
    const auto = await writeRead(new DiskTier({ directory: parent, compression: 'auto' }), walks, batches, 2);
    console.log(line('disk, auto', auto));
    const mem = await writeRead(new CompressedMemoryTier({ capacity: 4096 * MiB }), walks, batches, 2);
    console.log(line('compressed memory', mem));
    for (const [label, r] of [
      ['disk lz4', lz4],
      ['disk auto', auto],
      ['compressed memory', mem],
    ] as const) {
      console.log(`   ${label.padEnd(18)} bytes stored / uncompressed: ${fmt(r.stored / none.stored, 3)} (ratio ${fmt(r.bytes / r.stored)}), write time ${fmt(r.writeMs / none.writeMs)}x, read time ${fmt(r.readMs / none.readMs)}x of uncompressed disk`);
    }

    // 2b. The same data through a SpillStore: memory → compressed memory → disk vs memory → disk.
    const chainCount = quick ? 8 : 16;
    console.log(`\n2b. through a SpillStore (64 MiB limit): ${chainCount} values of 32 MiB of the same random walk, written then read back`);
    const plain = await chainRun([new DiskTier({ directory: parent })], walks, chainCount);
    const chained = await chainRun([new CompressedMemoryTier({ name: 'lz4-memory', capacity: 128 * MiB }), new DiskTier({ directory: parent })], walks, chainCount);
    for (const [label, r] of [
      ['memory → disk', plain],
      ['memory → lz4 memory → disk', chained],
    ] as const) {
      console.log(`${label.padEnd(34)} disk written ${fmt(r.diskWritten / MiB, 1).padStart(7)} MiB, spill ${fmt(r.writeMs / 1000, 2)} s, read back ${fmt(r.readMs / 1000, 2)} s`);
    }
    console.log(`   chain vs disk only: bytes written to disk ${fmt(chained.diskWritten / plain.diskWritten, 3)}, spill time ${fmt(chained.writeMs / plain.writeMs)}x, read time ${fmt(chained.readMs / plain.readMs)}x`);

    // 3. Event-loop delay on 64 MiB values. A delay monitor records the gaps between its
    // ticks, so a block of B ms reads as a gap between B and B + resolution: the 10 ms monitor
    // of earlier runs read up to 10 ms above the longest block (an idle process read 10-11.6 ms
    // on it). The 1 ms monitor bounds the longest block within 1 ms; the 10 ms one runs
    // alongside so that the figures compare with earlier runs.
    const bigCount = quick ? 2 : 4;
    const bigValues = Array.from({ length: bigCount }, (_, i) => randomWalkBytes(64 * MiB, i + 101));
    const monitors = (): [IntervalHistogram, IntervalHistogram] => {
      const pair: [IntervalHistogram, IntervalHistogram] = [monitorEventLoopDelay({ resolution: 1 }), monitorEventLoopDelay({ resolution: 10 })];
      for (const m of pair) m.enable();
      return pair;
    };
    const idle = monitors();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    for (const m of idle) m.disable();
    gc();
    const busy = monitors();
    // V8's collections in the phase: the 64 MiB buffers (each read's output and decompressed
    // chunks) start full ones, and a miss of the target has been one (docs/benchmarks.md,
    // nineteenth session), so the longest is printed beside the maximum.
    const collections: { ms: number; full: boolean }[] = [];
    const observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const { detail } = e.toJSON() as { detail?: { kind?: number } };
        collections.push({ ms: e.duration, full: detail?.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR });
      }
    });
    observer.observe({ entryTypes: ['gc'] });
    const elu0 = performance.eventLoopUtilization();
    const run = await writeRead(new CompressedMemoryTier({ capacity: 4096 * MiB }), bigValues, batches, 1, false);
    for (const m of busy) m.disable();
    // Entries are delivered a turn late.
    await new Promise((resolve) => setImmediate(resolve));
    observer.disconnect();
    const elu = performance.eventLoopUtilization(elu0);
    const ms = (ns: number): string => fmt(ns / 1e6, 1);
    console.log(`\n3. compressed memory tier, ${bigCount} values of 64 MiB written then read one at a time`);
    console.log(line('compressed memory', run));
    console.log(
      `   event-loop delay (1 ms monitor: the longest block, within 1 ms): max ${ms(busy[0].max)} ms (target < 20), p99 ${ms(busy[0].percentile(99))} ms, utilisation ${fmt(elu.utilization)}`,
    );
    const full = collections.filter((c) => c.full);
    const longest = (cs: readonly { ms: number }[]): string => fmt(Math.max(0, ...cs.map((c) => c.ms)), 1);
    console.log(
      `   V8's collections meanwhile: ${full.length} full (longest ${longest(full)} ms), ${collections.length - full.length} others (longest ${longest(collections.filter((c) => !c.full))} ms): a maximum near the longest is a collection's pause`,
    );
    console.log(`   idle reference (1 s, same monitor): max ${ms(idle[0].max)} ms, p99 ${ms(idle[0].percentile(99))} ms`);
    const paging = await pagingReference(bigCount, 64 * MiB);
    console.log(
      `   paging reference (the loop idle while another thread first-touches ${bigCount} x 64 MiB, the pages the reads' values need on whatever thread): max ${ms(paging.max)} ms, p99 ${ms(paging.percentile(99))} ms in ${fmt(paging.ms / 1000, 1)} s`,
    );
    console.log(`   the 10 ms monitor of earlier runs (reads up to 10 ms above the longest block): max ${ms(busy[1].max)} ms, idle ${ms(idle[1].max)} ms`);
  } finally {
    await fsp.rm(parent, { recursive: true, force: true });
  }
}
