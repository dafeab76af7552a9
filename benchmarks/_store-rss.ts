/**
 * Phase `rss` of the store benchmark: peak process RSS while `totalBytes` of `valueBytes`
 * values stream through an embedded store with the defaults (DiskTier, RSS monitor),
 * against `memoryLimit + 64 MiB` for a bare Node plus the store. Values are produced while
 * the store lets producers run, then read back and deleted one by one.
 *
 * It runs in a child process started for it, as an embedded user's process would be: no
 * `--expose-gc`, no memory left behind by the other phases. The peak is the kernel's own
 * high-water mark (VmHWM, reset through /proc/self/clear_refs), so no reading can miss it
 * and no sampler adds memory of its own; where that is not available (not Linux) a worker
 * thread samples RSS instead. The child also records where memory sat at its highest
 * reading.
 */
import { execFile } from 'node:child_process';
import fsp from 'node:fs/promises';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { SpillStore } from '../src/index.js';
import { GiB, MiB, fmt, mismatches, rows, sleep } from './_store-common.js';

const HEADROOM = 64 * MiB;

interface PeakTracker {
  readonly how: string;
  stop(): Promise<number>;
}

/** The kernel's peak RSS from now on, or a sampling thread's where the kernel's cannot be reset. */
async function trackPeak(sampleMs: number): Promise<PeakTracker> {
  try {
    await fsp.writeFile('/proc/self/clear_refs', '5');
    return {
      how: 'VmHWM',
      stop: async () => {
        const status = await fsp.readFile('/proc/self/status', 'utf8');
        const kib = /^VmHWM:\s+(\d+) kB/m.exec(status);
        if (kib === null) throw new Error('no VmHWM in /proc/self/status');
        return Number(kib[1]) * 1024;
      },
    };
  } catch {
    return sampler(sampleMs);
  }
}

function sampler(ms: number): PeakTracker {
  const code = `
    const { parentPort } = require('node:worker_threads');
    let peak = process.memoryUsage.rss();
    const t = setInterval(() => { peak = Math.max(peak, process.memoryUsage.rss()); }, ${ms});
    parentPort.on('message', () => { clearInterval(t); parentPort.postMessage(Math.max(peak, process.memoryUsage.rss())); });`;
  const worker = new Worker(code, { eval: true });
  return {
    how: `sampled every ${ms} ms`,
    stop: () =>
      new Promise<number>((resolve) => {
        worker.once('message', (peak: number) => void worker.terminate().then(() => resolve(peak)));
        worker.postMessage('stop');
      }),
  };
}

/** RSS of a bare `node` process (no tsx): what "Node itself" costs here. */
async function bareNodeRss(): Promise<number> {
  const { stdout } = await promisify(execFile)(process.execPath, ['-e', 'console.log(process.memoryUsage.rss())']);
  return Number(stdout.trim());
}

/** What the child reports. */
interface ChildResult {
  baseline: number;
  peak: number;
  how: string;
  top: NodeJS.MemoryUsage;
  seconds: number;
  collections: number;
  bad: number;
}

async function streamThrough(parent: string, totalBytes: number, valueBytes: number, limit: number, collectGarbage: boolean): Promise<ChildResult> {
  const baseline = process.memoryUsage.rss();
  // collectGarbage is on by default (the monitor runs): false shows what its collections save.
  const store = await SpillStore.open({ memoryLimit: limit, directory: parent, ...(collectGarbage ? {} : { collectGarbage: false }) });
  store.on('error', (err: unknown) => console.error(`  store error: ${String(err)}`));
  const count = Math.floor(totalBytes / valueBytes);
  const peakTracker = await trackPeak(5);
  let top: NodeJS.MemoryUsage = process.memoryUsage();
  const watch = setInterval(() => {
    const now = process.memoryUsage();
    if (now.rss > top.rss) top = now;
  }, 20);
  let bad = 0;
  const t0 = performance.now();
  try {
    for (let i = 0; i < count; i++) {
      await store.whenResumed();
      // Filled at once, as a producer computing its values would (fill() yields per MiB).
      const value = new Float64Array(valueBytes / 8);
      for (let j = 0; j < value.length; j++) value[j] = i * 1e9 + j;
      store.set(`v${i}`, value);
    }
    for (let i = 0; i < count; i++) {
      bad += await mismatches((await store.get(`v${i}`)) as Float64Array, i);
      store.delete(`v${i}`);
    }
  } finally {
    clearInterval(watch);
    await store.close();
  }
  const seconds = (performance.now() - t0) / 1000;
  const peak = await peakTracker.stop();
  return { baseline, peak, how: peakTracker.how, top, seconds, collections: store.stats().counters.collections, bad };
}

export async function rssBound(parent: string, totalBytes: number, valueBytes: number, limit: number, collectGarbage = true): Promise<void> {
  const args = ['--import', 'tsx', fileURLToPath(import.meta.url), CHILD, parent, String(totalBytes), String(valueBytes), String(limit), String(collectGarbage)];
  const { stdout } = await promisify(execFile)(process.execPath, args, { maxBuffer: 1024 * 1024 });
  const { baseline, peak, how, top, seconds, collections, bad } = JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as ChildResult;
  const bare = await bareNodeRss();
  // The child carries tsx and the store's modules: judged is the store's growth over what
  // was there before it opened, on top of a bare Node.
  const judged = peak - baseline + bare;
  const bound = limit + HEADROOM;
  const rest = top.rss - top.heapTotal - top.external;
  console.log(
    `rss${collectGarbage ? '' : ' (collectGarbage: false)'}: ${fmt(totalBytes / GiB)} GiB of ${valueBytes / MiB} MiB values through a ${limit / MiB} MiB store in ${fmt(seconds, 1)} s ` +
      `(${collections} collections): peak RSS ${fmt(peak / MiB, 0)} MiB (${how}), ${fmt(baseline / MiB, 0)} MiB before the store opened, ` +
      `a bare node ${fmt(bare / MiB, 0)} MiB: ${fmt(judged / MiB, 0)} MiB against ${fmt(bound / MiB, 0)} MiB (limit + 64 MiB). ` +
      `At the highest reading (${fmt(top.rss / MiB, 0)} MiB): V8 heap ${fmt(top.heapTotal / MiB, 0)} MiB, ` +
      `array buffers ${fmt(top.arrayBuffers / MiB, 0)} MiB (live values and ones awaiting collection), ` +
      `code, native and malloc ${fmt(rest / MiB, 0)} MiB; verified: ${bad === 0 ? 'ok' : `${bad} bad`}`,
  );
  rows.push({
    name: `peak RSS (${fmt(totalBytes / GiB)} GiB of ${valueBytes / MiB} MiB, ${limit / MiB} MiB store${collectGarbage ? '' : ', no collections'})`,
    reference: `limit + 64 MiB = ${fmt(bound / MiB, 0)} MiB`,
    measured: `${fmt(judged / MiB, 0)} MiB`,
    ratio: fmt(judged / bound),
    target: '<= 1',
    pass: judged <= bound && bad === 0,
  });
  await sleep(10);
}

const CHILD = '--rss-child';
if (process.argv[2] === CHILD && process.argv[1] === fileURLToPath(import.meta.url)) {
  const [parent, total, value, limit, collect] = process.argv.slice(3);
  void streamThrough(parent, Number(total), Number(value), Number(limit), collect === 'true').then((result) => console.log(JSON.stringify(result)));
}
