/**
 * `npm run bench -- tpch [--memory-limit 256MiB] [--factor 4]`: TPC-H Q1 and Q3 on a local
 * cluster of 2 workers with `factor`× the cluster's memory of orders and line items, beside
 * DuckDB's own time for the same query over the same rows in Parquet on this machine (the
 * bar for one machine). Checks: the answer equals DuckDB's row for row; each worker's peak
 * RSS ≤ its limit; the worst event-loop delay. Prints the load average.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { formatBytes, parseBytes } from '../src/units.js';
import { defaultPartitions } from '../src/workloads/index.js';
import { compareRows, tpchPlan } from '../src/workloads/tpch/index.js';
import { TpchDuckDB } from '../test/helpers/tpch-duckdb.js';

const WORKERS = 2;
const SEED = 0x5eed;
const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The cluster runs the built JavaScript, as users run it (from source every process also carries tsx). */
async function builtRunLocal(): Promise<typeof import('../src/cli/local.js').runLocal> {
  await promisify(execFile)('npm', ['run', 'build', '--silent'], { cwd: ROOT });
  const built = (await import(pathToFileURL(path.join(ROOT, 'dist', 'cli', 'local.js')).href)) as typeof import('../src/cli/local.js');
  return built.runLocal;
}

function flag(args: string[], name: string, fallback: string): string {
  const at = args.indexOf(name);
  return at >= 0 && args[at + 1] !== undefined ? args[at + 1] : fallback;
}

export default async function tpch(args: string[]): Promise<void> {
  const memoryLimit = parseBytes(flag(args, '--memory-limit', '256MiB'), 'memory limit');
  const factor = Number(flag(args, '--factor', '4'));
  const size = factor * WORKERS * memoryLimit;
  const partitions = defaultPartitions(size, memoryLimit, WORKERS);
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'spillway-bench-tpch-'));
  try {
    console.log(`tpch: ${WORKERS} workers × ${formatBytes(memoryLimit)}, data ${formatBytes(size)} (${factor}× the cluster's memory), ${partitions} partitions, load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
    const scale = tpchPlan('q1', { bytes: size, partitions, seed: SEED }).scale;
    const t0 = performance.now();
    const duckdb = await TpchDuckDB.create(scale, dir);
    console.log(`reference: scale factor ${scale.scaleFactor.toFixed(3)} written to Parquet for DuckDB in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const runLocal = await builtRunLocal();
    const lines: string[][] = [['query', 'spillway compute', 'DuckDB', 'ratio', 'equal to DuckDB', 'peak RSS / limit', 'worst loop delay', 'spilled']];
    try {
      for (const query of ['q1', 'q3'] as const) {
        const summary = await runLocal({ workers: WORKERS, memoryLimit, workload: `tpch-${query}`, size, partitions, seed: SEED, nthreads: 1, localDirectory: dir });
        const reference = query === 'q1' ? await duckdb.q1() : await duckdb.q3();
        const same = compareRows(summary.rows ?? [], reference.rows);
        const peak = Math.max(...summary.workers.map((w) => w.peakRss / w.memoryLimit));
        const delay = Math.max(...summary.workers.map((w) => w.maxEventLoopDelayMs));
        const spilled = summary.workers.reduce((n, w) => n + w.spilledBytes, 0);
        if (!summary.verified) console.log(`${query}: not verified: ${summary.problems.slice(0, 3).join('; ')}`);
        if (!same.verified) console.log(`${query}: differs from DuckDB: ${same.problems.slice(0, 3).join('; ')}`);
        lines.push([
          query,
          `${summary.computeSeconds.toFixed(1)} s`,
          `${reference.seconds.toFixed(2)} s`,
          `${(summary.computeSeconds / reference.seconds).toFixed(0)}×`,
          same.verified && summary.verified ? 'yes' : 'NO',
          `${peak.toFixed(2)} ${peak <= 1 ? 'PASS' : 'FAIL'}`,
          `${delay.toFixed(0)} ms`,
          formatBytes(spilled),
        ]);
      }
    } finally {
      duckdb.close();
    }
    const widths = lines[0].map((_, c) => Math.max(...lines.map((l) => l[c].length)));
    for (const line of lines) console.log(line.map((cell, c) => cell.padEnd(widths[c])).join('  '));
    console.log(`load average at the end ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}
