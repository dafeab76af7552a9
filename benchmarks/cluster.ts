/**
 * `npm run bench -- cluster [--memory-limit 256MiB] [--factor 4] [--methods p2p,tasks] [--target 2]
 * [--workloads shuffle,map-reduce] [--partitions P] [--profile DIR [--v8-flags F]] [--scheduler-memory P1,P2]`: the built-in workloads (the shuffle once
 * per method) on a local cluster of 2 worker processes, with data = factor × the cluster's
 * memory. `--target`: the compute time the shuffle must stay within, as a multiple of the
 * disk reference (docs/benchmarks.md). `--profile DIR`: the cluster's processes run with a
 * sampling profiler and a stall tracer (_stall-trace.mjs), and each worker's profile and the
 * functions caught in its event-loop stalls are printed at the end (_profile-report.ts);
 * with `--v8-flags "..."` the preload also sets those V8 flags in each process.
 * `--partitions`: instead of the `local` default. `--scheduler-memory`: first, the
 * scheduler's heap per task for p2p shuffle graphs of those partition counts
 * (_scheduler-memory.ts); `--workloads none` runs nothing else.
 * Workers run from dist/ (built first). Checks: the result verifies; each worker's peak RSS (kernel high-water mark) against
 * its memory limit; each worker's worst and p99 event-loop delay (from its heartbeats); for the
 * shuffle, bytes served to peers from disk vs from memory; and the wall time against
 * writing then reading the same bytes once on the same disk (measured in the same run),
 * and the shuffle's against the bare exchanges of the same data, in memory and spilling
 * (_bare-exchange.ts).
 */
import { randomFillSync } from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { LocalSummary } from '../src/cli/local.js';
import { formatBytes } from '../src/units.js';
import { type ShuffleMethod, type WorkloadName, defaultPartitions } from '../src/workloads/index.js';
import { bareExchange } from './_bare-exchange.js';
import { WORKERS, builtRunLocal, clusterSize, flag, loadAverage } from './_cluster-common.js';
import { profileReport } from './_profile-report.js';
import { schedulerMemory } from './_scheduler-memory.js';

const MiB = 1024 * 1024;
/** The bare exchange runs in memory when the data is at most 1 / this of the host's memory. */
const BARE_MEMORY_SHARE = 4;
/**
 * Share of a worker's memory limit that a process of the spilling bare exchange keeps in
 * memory: the rest of a worker's memory goes to the process itself and to the inputs being
 * split, which the bare exchange does not count.
 */
const BARE_SPILLING_SHARE = 0.5;

/** The bare exchanges' times: in memory (when it fits), spilling, and spilling as a worker. */
interface BareTimes {
  inMemory: number | undefined;
  spilling: number;
  spillingAsWorker: number;
}

/** The physical floor: write `bytes` to a file in `dir` in 8 MiB writes, then read it back. */
async function diskReference(dir: string, bytes: number): Promise<{ writeSeconds: number; readSeconds: number }> {
  const file = path.join(dir, 'reference.bin');
  const chunk = randomFillSync(Buffer.alloc(8 * MiB));
  const t0 = performance.now();
  const out = await fsp.open(file, 'w');
  for (let done = 0; done < bytes; done += chunk.length) await out.write(chunk, 0, Math.min(chunk.length, bytes - done));
  await out.datasync();
  await out.close();
  const t1 = performance.now();
  const input = await fsp.open(file, 'r');
  const buffer = Buffer.alloc(8 * MiB);
  for (let at = 0; ; ) {
    const { bytesRead } = await input.read(buffer, 0, buffer.length, at);
    if (bytesRead === 0) break;
    at += bytesRead;
  }
  await input.close();
  const t2 = performance.now();
  await fsp.rm(file, { force: true });
  return { writeSeconds: (t1 - t0) / 1000, readSeconds: (t2 - t1) / 1000 };
}

interface Row {
  check: string;
  value: string;
  target: string;
  pass: boolean | undefined;
}

/** A row's value for one time over another: `a s / b s = a/b`. */
function timesOver(seconds: number, over: number): string {
  return `${seconds.toFixed(1)} s / ${over.toFixed(1)} s = ${(seconds / over).toFixed(2)}`;
}

function rows(s: LocalSummary, referenceSeconds: number, target: number, bare: BareTimes | undefined): Row[] {
  const name = s.method === undefined ? s.workload : `${s.workload} (${s.method})`;
  const out: Row[] = [
    { check: `${name}: completed and verified`, value: `${s.completed && s.verified}${s.problems.length > 0 ? ` (${s.problems[0]})` : ''}`, target: 'true', pass: s.completed && s.verified },
  ];
  let spilled = 0;
  for (const w of s.workers) {
    spilled += w.spilledBytes;
    const ratio = w.peakRss / w.memoryLimit;
    out.push({ check: `${name}: ${w.name} peak RSS / memory limit`, value: `${formatBytes(w.peakRss)} / ${formatBytes(w.memoryLimit)} = ${ratio.toFixed(2)}`, target: '≤ 1', pass: ratio <= 1 });
    out.push({
      check: `${name}: ${w.name} event-loop delay, worst / p99`,
      value: `${w.maxEventLoopDelayMs.toFixed(0)} / ${w.p99EventLoopDelayMs.toFixed(0)} ms`,
      target: '< 100 / < 20',
      pass: w.maxEventLoopDelayMs < 100 && w.p99EventLoopDelayMs < 20,
    });
    if (w.loopRunSeconds !== null && w.loopWaitSeconds !== null) {
      // Where the delays come from: the loop's own work, or waiting for a core.
      out.push({ check: `${name}: ${w.name} event loop on a core / waiting for one`, value: `${w.loopRunSeconds.toFixed(1)} s / ${w.loopWaitSeconds.toFixed(1)} s`, target: '', pass: undefined });
    }
    if (s.method === 'tasks') {
      const served = w.servedFromDiskBytes + w.servedFromMemoryBytes;
      out.push({
        check: `${name}: ${w.name} served to peers from disk / memory`,
        value: `${formatBytes(w.servedFromDiskBytes)} / ${formatBytes(w.servedFromMemoryBytes)} (${served > 0 ? ((100 * w.servedFromDiskBytes) / served).toFixed(0) : 0}% from disk)`,
        target: 'mostly disk',
        pass: w.servedFromDiskBytes > w.servedFromMemoryBytes,
      });
    }
    out.push({ check: `${name}: ${w.name} spilled / unspilled (all causes)`, value: `${formatBytes(w.spilledBytes)} / ${formatBytes(w.unspilledBytes)}`, target: '', pass: undefined });
  }
  const timeRatio = s.computeSeconds / referenceSeconds;
  out.push({
    check: `${name}: compute time / disk write+read of the data`,
    value: timesOver(s.computeSeconds, referenceSeconds),
    target: s.workload === 'shuffle' ? `≤ ${target}` : '',
    pass: s.workload === 'shuffle' ? timeRatio <= target : undefined,
  });
  if (s.workload === 'shuffle' && bare !== undefined) {
    const against = (kind: string, seconds: number): Row => ({ check: `${name}: compute time / bare exchange ${kind}`, value: timesOver(s.computeSeconds, seconds), target: '', pass: undefined });
    if (bare.inMemory !== undefined) out.push(against('in memory', bare.inMemory));
    out.push(against('spilling', bare.spilling));
    out.push(against(`spilling in a worker's environment`, bare.spillingAsWorker));
    const overDisk = (kind: string, seconds: number): Row => ({ check: `bare exchange ${kind} / disk write+read of the data`, value: timesOver(seconds, referenceSeconds), target: '', pass: undefined });
    out.push(overDisk('spilling', bare.spilling));
    out.push(overDisk(`spilling in a worker's environment`, bare.spillingAsWorker));
  }
  const held = s.workers.reduce((n, w) => n + w.peakDiskBytes, 0);
  out.push({
    check: `${name}: peak bytes on disk (sum of the workers' peaks) / data`,
    value: `${formatBytes(held)} / ${formatBytes(s.dataBytes)} = ${(held / s.dataBytes).toFixed(2)}`,
    target: '≤ 2.5',
    pass: held / s.dataBytes <= 2.5,
  });
  const writes = spilled / s.dataBytes;
  out.push({ check: `${name}: bytes spilled / data`, value: `${formatBytes(spilled)} / ${formatBytes(s.dataBytes)} = ${writes.toFixed(2)}`, target: '≤ 1.5', pass: writes <= 1.5 });
  return out;
}

/**
 * The bare exchanges (_bare-exchange.ts) of the same data: in memory where the data fits in
 * 1 / `BARE_MEMORY_SHARE` of the host's, and spilling past half of a worker's memory limit,
 * with glibc keeping freed memory and then in a worker's environment.
 */
async function timeBareExchanges(size: number, partitions: number, memoryLimit: number, dir: string): Promise<BareTimes> {
  const run = async (kind: string, memoryBytes: number, asWorkerOf?: number): Promise<number> => {
    const { seconds, phases, verification } = await bareExchange(size, partitions, { memoryBytes, dir, asWorkerOf });
    if (!verification.verified) throw new Error(`bare exchange ${kind} did not verify: ${verification.problems[0]}`);
    console.log(`bare exchange ${kind}: ${formatBytes(size)} in ${partitions} partitions in ${seconds.toFixed(1)} s, verified (load average ${loadAverage()})`);
    phases.forEach((p, i) => {
      const steps = Object.entries(p).filter(([step]) => step !== 'written' && step !== 'peakRss');
      const rss = `peak RSS ${formatBytes(p.peakRss)} (${(p.peakRss / memoryLimit).toFixed(2)} of a worker's limit)`;
      console.log(`  process ${i}: ${steps.map(([step, s]) => `${step} ${s.toFixed(1)}`).join(', ')} s; written to its file ${formatBytes(p.written)}; ${rss}`);
    });
    return seconds;
  };
  let inMemory: number | undefined;
  if (size > os.totalmem() / BARE_MEMORY_SHARE) console.log(`bare exchange in memory: not run (${formatBytes(size)} is over 1/${BARE_MEMORY_SHARE} of this host's memory)`);
  else inMemory = await run('in memory', Infinity);
  const budget = memoryLimit * BARE_SPILLING_SHARE;
  const spilling = await run(`spilling past ${formatBytes(budget)} per process`, budget);
  const spillingAsWorker = await run(`spilling past ${formatBytes(budget)} per process, in a worker's environment`, budget, memoryLimit);
  return { inMemory, spilling, spillingAsWorker };
}

export default async function cluster(args: string[]): Promise<void> {
  const { memoryLimit, factor, size } = clusterSize(args);
  const target = Number(flag(args, '--target', '2'));
  const methods = flag(args, '--methods', 'p2p,tasks').split(',') as ShuffleMethod[];
  const workloads = flag(args, '--workloads', 'shuffle,map-reduce').split(',');
  const profile = flag(args, '--profile', '');
  const v8Flags = flag(args, '--v8-flags', '');
  if (v8Flags !== '' && profile === '') throw new Error('--v8-flags needs --profile: the profiling preload sets them in the cluster\'s processes');
  const partitions = flag(args, '--partitions', '') === '' ? undefined : Number(flag(args, '--partitions', ''));
  const schedulerPartitions = flag(args, '--scheduler-memory', '').split(',').filter((p) => p !== '').map(Number);
  for (const p of schedulerPartitions) {
    const m = await schedulerMemory(p);
    console.log(
      `scheduler memory: p2p shuffle of ${m.partitions} partitions, ${m.tasks} tasks submitted in ${m.submitSeconds.toFixed(1)} s: heap +${formatBytes(m.heapBytes)}, ${(m.heapBytes / m.tasks).toFixed(0)} B per task (load average ${loadAverage()})`,
    );
  }
  if (workloads.includes('none')) return;
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'spillway-bench-cluster-'));
  try {
    console.log(`cluster: ${WORKERS} workers × ${formatBytes(memoryLimit)}, data ${formatBytes(size)} (${factor}× the cluster's memory), load average ${loadAverage()}`);
    const ref = await diskReference(dir, size);
    const referenceSeconds = ref.writeSeconds + ref.readSeconds;
    console.log(`reference: write ${formatBytes(size)} in ${ref.writeSeconds.toFixed(1)} s, read it in ${ref.readSeconds.toFixed(1)} s`);
    const runLocal = await builtRunLocal();
    // Before the profiler's preload is set: it would load into the bare exchange's processes too.
    const bare = workloads.includes('shuffle') ? await timeBareExchanges(size, partitions ?? defaultPartitions(size, memoryLimit, WORKERS), memoryLimit, dir) : undefined;
    if (profile !== '') {
      // Read by the cluster's processes, spawned from here on.
      await fsp.mkdir(profile, { recursive: true });
      const tracer = fileURLToPath(new URL('./_stall-trace.mjs', import.meta.url));
      process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --import=${tracer}`.trim();
      process.env.SPILLWAY_STALL_TRACE_DIR = path.resolve(profile);
      if (v8Flags !== '') process.env.SPILLWAY_STALL_TRACE_V8_FLAGS = v8Flags;
    }
    const table: Row[] = [];
    const runs: Array<{ workload: WorkloadName; method?: ShuffleMethod }> = [
      ...(workloads.includes('shuffle') ? methods.map((method) => ({ workload: 'shuffle' as const, method })) : []),
      ...(workloads.includes('map-reduce') ? [{ workload: 'map-reduce' as const }] : []),
    ];
    for (const { workload, method } of runs) {
      const summary = await runLocal({ workers: WORKERS, memoryLimit, workload, method, size, partitions, nthreads: 1, localDirectory: dir });
      console.log(`${workload}${method === undefined ? '' : ` (${method})`}: ${summary.partitions} partitions (${formatBytes(size / summary.partitions)} each), ${summary.tasks.total} tasks, compute ${summary.computeSeconds.toFixed(1)} s, verify ${summary.verifySeconds.toFixed(1)} s`);
      table.push(...rows(summary, referenceSeconds, target, bare));
    }
    const width = Math.max(...table.map((r) => r.check.length));
    const valueWidth = Math.max(...table.map((r) => r.value.length));
    for (const r of table) {
      const verdict = r.pass === undefined ? '' : r.pass ? 'PASS' : 'FAIL';
      console.log(`${r.check.padEnd(width)}  ${r.value.padEnd(valueWidth)}  ${r.target.padEnd(11)}  ${verdict}`);
    }
    console.log(`load average at the end ${loadAverage()}`);
    if (profile !== '') await profileReport(profile);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}
