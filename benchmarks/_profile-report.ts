/**
 * Reads what `npm run bench -- cluster --profile DIR` left in DIR (each process's main-thread
 * CPU profile and its stalls-<pid>.json, both from _stall-trace.mjs) and
 * prints, per worker: its loop delay, where its main thread's time went, and for the
 * longest stalls, which functions the profiler caught running in them (and GC pauses in
 * them). A stall with few samples is time the process did not get a core (machine load).
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { constants } from 'node:perf_hooks';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}
interface Stall {
  startUs: number;
  endUs: number;
  ms: number;
}
interface Trace {
  pid: number;
  argv: string[];
  delay: { maxMs: number; p99Ms: number; meanMs: number };
  usage?: {
    userSeconds: number;
    systemSeconds: number;
    peak: { heapUsed: number; heapTotal: number; external: number; arrayBuffers: number };
    /** Linux only: every thread's CPU time, largest first. */
    threads?: { main: boolean; userSeconds: number; systemSeconds: number }[];
  };
  stalls: Stall[];
  gcs: { startUs: number; ms: number; kind?: number; flags?: number }[];
}

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

/** A GC's kind, and why when it was not V8's own choice (forced: `gc()`; memory: external-memory pressure). */
function gcName(g: { kind?: number; flags?: number }): string {
  const flags = g.flags ?? 0;
  const why = flags & constants.NODE_PERFORMANCE_GC_FLAGS_FORCED ? ' forced' : flags & (constants.NODE_PERFORMANCE_GC_FLAGS_ALL_EXTERNAL_MEMORY | constants.NODE_PERFORMANCE_GC_FLAGS_ALL_AVAILABLE_GARBAGE) ? ' memory' : '';
  return `${GC_KINDS[g.kind ?? 0] ?? g.kind}${why}`;
}

function frameName(f: CallFrame): string {
  const file = f.url === '' ? '' : ` ${f.url.replace(/^.*\/(dist|node_modules)\//, '$1/').replace(/^file:\/\//, '')}:${f.lineNumber + 1}`;
  return `${f.functionName || '(anonymous)'}${file}`;
}

/** Per sample: a label made of its leaf function and the deepest frame of Spillway's own code above it. */
class Samples {
  readonly times: number[] = [];
  readonly durations: number[] = [];
  readonly labels: string[] = [];

  constructor(profile: CpuProfile) {
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    const parent = new Map<number, number>();
    for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    const labelOf = new Map<number, string>();
    const label = (id: number): string => {
      const known = labelOf.get(id);
      if (known !== undefined) return known;
      const leaf = byId.get(id) as ProfileNode;
      let own: CallFrame | undefined;
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const f = (byId.get(at) as ProfileNode).callFrame;
        if (f.url.includes('/dist/')) {
          own = f;
          break;
        }
      }
      const text = own === undefined || own === leaf.callFrame ? frameName(leaf.callFrame) : `${frameName(leaf.callFrame)} ← ${frameName(own)}`;
      labelOf.set(id, text);
      return text;
    };
    let t = profile.startTime;
    for (let i = 0; i < profile.samples.length; i++) {
      t += profile.timeDeltas[i];
      this.times.push(t);
      this.durations.push(profile.timeDeltas[i + 1] ?? 0);
      this.labels.push(label(profile.samples[i]));
    }
  }

  /** Milliseconds per label for the samples in [fromUs, toUs]. */
  between(fromUs: number, toUs: number): Map<string, number> {
    const out = new Map<string, number>();
    for (let i = 0; i < this.times.length; i++) {
      if (this.times[i] < fromUs || this.times[i] > toUs) continue;
      out.set(this.labels[i], (out.get(this.labels[i]) ?? 0) + Math.min(this.durations[i], 20_000) / 1000);
    }
    return out;
  }
}

function top(map: Map<string, number>, n: number, exclude = new Set<string>()): string[] {
  return [...map]
    .filter(([k]) => !exclude.has(k))
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, ms]) => `${ms.toFixed(0).padStart(6)} ms  ${k}`);
}

export async function profileReport(dir: string, stallsShown = 12): Promise<void> {
  const files = await fsp.readdir(dir);
  for (const file of files.filter((f) => /^stalls-\d+\.json$/.test(f)).sort()) {
    const trace = JSON.parse(await fsp.readFile(path.join(dir, file), 'utf8')) as Trace;
    const role = trace.argv.includes('worker') ? 'worker' : trace.argv.includes('scheduler') ? 'scheduler' : undefined;
    if (role === undefined) continue;
    const profileFile = files.find((f) => f === `profile-${trace.pid}.cpuprofile`);
    console.log(`\n== ${role} pid ${trace.pid}: loop delay worst ${trace.delay.maxMs.toFixed(0)} ms, p99 ${trace.delay.p99Ms.toFixed(0)} ms, mean ${trace.delay.meanMs.toFixed(1)} ms; ${trace.stalls.length} turns over 50 ms`);
    if (trace.usage !== undefined) {
      const { userSeconds, systemSeconds, peak } = trace.usage;
      const mib = (n: number): string => `${(n / 2 ** 20).toFixed(0)} MiB`;
      console.log(`   CPU ${userSeconds.toFixed(1)} s user + ${systemSeconds.toFixed(1)} s system (all threads); peak JS heap ${mib(peak.heapUsed)} used of ${mib(peak.heapTotal)}, array buffers ${mib(peak.arrayBuffers)}`);
      const threads = trace.usage.threads ?? [];
      const main = threads.find((t) => t.main);
      if (main !== undefined) {
        // Node names none of its threads: the others are told apart by what they cost (docs/benchmarks.md).
        const others = threads.filter((t) => !t.main && t.userSeconds + t.systemSeconds >= 0.05);
        const seconds = (t: { userSeconds: number; systemSeconds: number }): string => (t.userSeconds + t.systemSeconds).toFixed(1);
        console.log(`   CPU by thread (user + system): main ${seconds(main)} s; ${others.length} others over 0.05 s, largest first: ${others.map(seconds).join(', ')} s`);
      }
    }
    const gcMs = trace.gcs.reduce((s, g) => s + g.ms, 0);
    console.log(`   GC pauses over 5 ms: ${trace.gcs.length}, ${gcMs.toFixed(0)} ms in all, longest ${Math.max(0, ...trace.gcs.map((g) => g.ms)).toFixed(0)} ms`);
    const byKind = new Map<string, { n: number; ms: number; max: number }>();
    for (const g of trace.gcs) {
      const k = byKind.get(gcName(g)) ?? { n: 0, ms: 0, max: 0 };
      byKind.set(gcName(g), { n: k.n + 1, ms: k.ms + g.ms, max: Math.max(k.max, g.ms) });
    }
    for (const [kind, k] of byKind) console.log(`     ${kind}: ${k.n}, ${k.ms.toFixed(0)} ms, longest ${k.max.toFixed(0)} ms`);
    if (profileFile === undefined) continue;
    const samples = new Samples(JSON.parse(await fsp.readFile(path.join(dir, profileFile), 'utf8')) as CpuProfile);
    const all = samples.between(-Infinity, Infinity);
    const busy = [...all].filter(([k]) => k !== '(idle)').reduce((s, [, ms]) => s + ms, 0);
    console.log(`   main thread: ${busy.toFixed(0)} ms busy, ${(all.get('(idle)') ?? 0).toFixed(0)} ms idle; busiest:`);
    for (const line of top(all, 15, new Set(['(idle)']))) console.log(`     ${line}`);
    const inStalls = new Map<string, number>();
    let caught = 0;
    for (const s of trace.stalls) {
      for (const [k, ms] of samples.between(s.startUs, s.endUs)) {
        inStalls.set(k, (inStalls.get(k) ?? 0) + ms);
        caught += ms;
      }
    }
    const stalled = trace.stalls.reduce((sum, s) => sum + s.ms, 0);
    console.log(`   in all turns over 50 ms (${stalled.toFixed(0)} ms; ${caught.toFixed(0)} ms of samples, the rest the process had no core):`);
    for (const line of top(inStalls, 15)) console.log(`     ${line}`);
    for (const s of [...trace.stalls].sort((a, b) => b.ms - a.ms).slice(0, stallsShown)) {
      const inside = samples.between(s.startUs, s.endUs);
      const sampled = [...inside.values()].reduce((a, b) => a + b, 0);
      const gcs = trace.gcs.filter((g) => g.startUs >= s.startUs - 1000 && g.startUs <= s.endUs);
      const gcText = gcs.length === 0 ? '' : `; GC ${gcs.map((g) => `${gcName(g)} ${g.ms.toFixed(0)} ms`).join(', ')}`;
      console.log(`   stall ${s.ms.toFixed(0)} ms (${sampled.toFixed(0)} ms sampled${gcText}):`);
      for (const line of top(inside, 4)) console.log(`       ${line}`);
    }
  }
}
