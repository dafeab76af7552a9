/** Phase 2 of `npm run bench -- store`: spill / unspill throughput against plain fs writes and reads. */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { SpillStore } from '../src/index.js';
import { GiB, MiB, fill, fmt, gbps, gc, median, rows, sleep } from './_store-common.js';

// ---- 2. spill / unspill throughput -----------------------------------------------------

async function makeValues(count: number, valueBytes: number, round: number): Promise<Float64Array[]> {
  const values: Float64Array[] = [];
  for (let i = 0; i < count; i++) {
    const a = new Float64Array(valueBytes / 8);
    await fill(a, round * 1000 + i, 1024 * 1024);
    values.push(a);
  }
  return values;
}

interface ThroughputRound {
  refWrite: number;
  storeWrite: number;
  refRead: number;
  storeRead: number;
}

async function timedMs(fn: () => Promise<void>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

/** Times `ref` and `mine`, `ref` first when asked; returns [ref ms, mine ms]. */
async function pair(refFirst: boolean, ref: () => Promise<void>, mine: () => Promise<void>): Promise<[number, number]> {
  if (refFirst) return [await timedMs(ref), await timedMs(mine)];
  const m = await timedMs(mine);
  return [await timedMs(ref), m];
}

const groups = (count: number, size: number): number[][] =>
  Array.from({ length: Math.ceil(count / size) }, (_, g) => Array.from({ length: Math.min(size, count - g * size) }, (_, j) => g * size + j));

/** Writes the values through fs and through the store, in alternating groups; adds the times to `out`. */
async function writePhase(store: SpillStore, files: string[], valueBytes: number, round: number, group: number, out: ThroughputRound): Promise<void> {
  const values = await makeValues(files.length, valueBytes, round);
  for (const [g, ids] of groups(files.length, group).entries()) {
    const [ref, mine] = await pair(
      (g + round) % 2 === 0,
      async () => {
        for (const i of ids) await fsp.writeFile(files[i], values[i]);
      },
      async () => {
        for (const i of ids) store.set(`k${i}`, values[i]);
        await store.evict();
      },
    );
    out.refWrite += ref;
    out.storeWrite += mine;
  }
}

/**
 * One round: 1 GiB each way through fs and through the store, interleaved in groups of
 * `group` values (alternating who goes first), so background writeback and noise hit both.
 */
async function throughputRound(parent: string, count: number, valueBytes: number, round: number, group = 4): Promise<ThroughputRound> {
  const refDir = await fsp.mkdtemp(path.join(parent, 'ref-'));
  const store = await SpillStore.open({ memoryLimit: 64 * GiB, target: false, spill: false, pause: false, directory: parent, monitorIntervalMs: 0 });
  const files = Array.from({ length: count }, (_, i) => path.join(refDir, `${i}.bin`));
  const out: ThroughputRound = { refWrite: 0, storeWrite: 0, refRead: 0, storeRead: 0 };
  try {
    // In its own function: a suspended async frame can keep stale references to the values alive.
    await writePhase(store, files, valueBytes, round, group, out);
    // Drop every strong reference so the store's weak references die and gets read the disk.
    for (let i = 0; i < 10 && store.stats().detached.count > 0; i++) {
      gc();
      await sleep(20);
    }
    if (store.stats().detached.count > 0) console.log(`  warning: ${store.stats().detached.count} values still detached`);
    const readsBefore = store.stats().counters.diskReads;
    let sink = 0;
    for (const [g, ids] of groups(count, group).entries()) {
      const [ref, mine] = await pair(
        (g + round) % 2 === 0,
        async () => {
          for (const i of ids) sink += (await fsp.readFile(files[i])).byteLength;
        },
        async () => {
          for (const i of ids) sink += ((await store.get(`k${i}`)) as Float64Array).byteLength;
        },
      );
      out.refRead += ref;
      out.storeRead += mine;
      await store.evict(); // the copies stay on disk: this only drops them from memory
      gc();
    }
    const reads = store.stats().counters.diskReads - readsBefore;
    if (reads !== count) console.log(`  warning: ${reads} disk reads for ${count} gets`);
    if (sink !== 2 * count * valueBytes) throw new Error(`read ${sink} bytes, expected ${2 * count * valueBytes}`);
  } finally {
    await store.close();
    await fsp.rm(refDir, { recursive: true, force: true });
  }
  return out;
}

export async function throughput(parent: string, count: number, valueBytes: number, rounds: number): Promise<void> {
  const total = count * valueBytes;
  const results: ThroughputRound[] = [];
  for (let round = 0; round < rounds; round++) {
    const r = await throughputRound(parent, count, valueBytes, round);
    results.push(r);
    console.log(
      `  round ${round + 1}: write fs ${fmt(gbps(total, r.refWrite))} / store ${fmt(gbps(total, r.storeWrite))} GB/s, ` +
        `read fs ${fmt(gbps(total, r.refRead))} / store ${fmt(gbps(total, r.storeRead))} GB/s`,
    );
    gc();
  }
  const what = `${count} x ${valueBytes / MiB} MiB Float64Array = ${fmt(total / GiB)} GiB`;
  for (const [name, ref, mine] of [
    ['spill', 'refWrite', 'storeWrite'],
    ['unspill', 'refRead', 'storeRead'],
  ] as const) {
    const refGbps = gbps(total, median(results.map((r) => r[ref])));
    const storeGbps = gbps(total, median(results.map((r) => r[mine])));
    const ratio = storeGbps / refGbps;
    console.log(`${name}: ${what}, median of ${rounds} rounds, fs/store interleaved in groups of 4 values: fs ${fmt(refGbps)} GB/s, store ${fmt(storeGbps)} GB/s, ratio ${fmt(ratio)}`);
    rows.push({
      name: `${name} throughput (${fmt(total / GiB)} GiB)`,
      reference: `fs ${name === 'spill' ? 'writeFile' : 'readFile'} ${fmt(refGbps)} GB/s`,
      measured: `${fmt(storeGbps)} GB/s`,
      ratio: fmt(ratio),
      target: '>= 0.8',
      pass: ratio >= 0.8,
    });
  }
}

