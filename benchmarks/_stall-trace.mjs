/**
 * Preloaded into the cluster's processes by `npm run bench -- cluster --profile DIR`
 * (`node --import`; NODE_OPTIONS may not carry `--cpu-prof`, so the profiler is started
 * through the inspector): samples each process's main thread every millisecond and
 * records every event-loop turn longer than STALL_MS (a 10 ms timer that fires late),
 * every GC pause over 5 ms, the loop-delay histogram, the process's CPU time (all
 * threads, and on Linux each thread's, sampled every half second so that threads which end
 * before the process are counted too) and its peak heap and external memory. At exit it writes
 * DIR/profile-<pid>.cpuprofile and DIR/stalls-<pid>.json. The times are CLOCK_MONOTONIC
 * microseconds, the clock of the profile's samples, so the report (_profile-report.ts)
 * finds which functions ran in each stall.
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import inspector from 'node:inspector';
import { monitorEventLoopDelay, PerformanceObserver, performance } from 'node:perf_hooks';
import v8 from 'node:v8';
import { isMainThread } from 'node:worker_threads';

const STALL_MS = 50;
/** Linux reports thread CPU times in USER_HZ ticks, 100 a second on every architecture Node runs on. */
const USER_HZ = 100;

/** Each thread's latest CPU times (seconds), by thread id; read from /proc, Linux only. */
const threadCpu = new Map();
function sampleThreads() {
  if (process.platform !== 'linux') return;
  let tids;
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      threadCpu.set(Number(tid), { userSeconds: Number(fields[11]) / USER_HZ, systemSeconds: Number(fields[12]) / USER_HZ });
    } catch {
      // The thread ended meanwhile: its last sample stands.
    }
  }
}
const TICK_MS = 10;
const dir = process.env.SPILLWAY_STALL_TRACE_DIR;

if (dir !== undefined && dir !== '' && isMainThread) {
  // `--v8-flags`: V8 flags NODE_OPTIONS may not carry (GC tuning experiments), set before
  // the process allocates much.
  const flags = process.env.SPILLWAY_STALL_TRACE_V8_FLAGS;
  if (flags !== undefined && flags !== '') v8.setFlagsFromString(flags);
  // performance.now() → monotonic µs.
  const originUs = Number(process.hrtime.bigint() / 1000n) - performance.now() * 1000;
  const session = new inspector.Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.setSamplingInterval', { interval: 1000 });
  session.post('Profiler.start');
  const stalls = [];
  const gcs = [];
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  const peak = { heapUsed: 0, heapTotal: 0, external: 0, arrayBuffers: 0 };
  setInterval(() => {
    const m = process.memoryUsage();
    for (const k of Object.keys(peak)) peak[k] = Math.max(peak[k], m[k]);
    sampleThreads();
  }, 500).unref();
  let last = process.hrtime.bigint();
  setInterval(() => {
    const now = process.hrtime.bigint();
    const ms = Number(now - last) / 1e6 - TICK_MS;
    if (ms > STALL_MS) stalls.push({ startUs: Number(last / 1000n) + TICK_MS * 1000, endUs: Number(now / 1000n), ms });
    last = now;
  }, TICK_MS).unref();
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if (e.duration > 5) gcs.push({ startUs: originUs + e.startTime * 1000, ms: e.duration, kind: e.detail?.kind, flags: e.detail?.flags });
    }
  }).observe({ entryTypes: ['gc'] });
  process.on('exit', () => {
    // A session on this thread answers synchronously.
    session.post('Profiler.stop', (err, result) => {
      if (err === null) writeFileSync(`${dir}/profile-${process.pid}.cpuprofile`, JSON.stringify(result.profile));
    });
    const delay = { maxMs: histogram.max / 1e6, p99Ms: histogram.percentile(99) / 1e6, meanMs: histogram.mean / 1e6 };
    const cpu = process.cpuUsage();
    sampleThreads();
    const threads = [...threadCpu].map(([tid, t]) => ({ main: tid === process.pid, ...t })).sort((a, b) => b.userSeconds + b.systemSeconds - a.userSeconds - a.systemSeconds);
    const usage = { userSeconds: cpu.user / 1e6, systemSeconds: cpu.system / 1e6, peak, threads };
    writeFileSync(`${dir}/stalls-${process.pid}.json`, JSON.stringify({ pid: process.pid, argv: process.argv.slice(1), delay, usage, stalls, gcs }));
  });
}
