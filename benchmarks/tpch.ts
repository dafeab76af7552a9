/**
 * `npm run bench -- tpch [--memory-limit 256MiB] [--factor 4] [--queries q1,q3]`: TPC-H Q1
 * and Q3 on a local cluster of 2 workers with `factor`× the cluster's memory of orders and
 * line items, beside DuckDB's own time for the same query over the same rows in Parquet on
 * this machine (the bar for one machine; the faster of two runs, 2 threads as the cluster
 * has). Checks: the answer equals DuckDB's row for row; each worker's peak RSS ≤ its limit;
 * the worst and p99 event-loop delay of either worker. Prints the load average.
 */
import { formatBytes } from '../src/units.js';
import { DEFAULT_SEED } from '../src/workloads/common.js';
import { defaultPartitions } from '../src/workloads/index.js';
import { type Q3Row, type TpchQuery, compareRows, tpchPlan } from '../src/workloads/tpch/index.js';
import { TpchDuckDB } from '../test/helpers/tpch-duckdb.js';
import { WORKERS, builtRunLocal, clusterSize, flag, loadAverage, withScratchDir } from './_cluster-common.js';

export default async function tpch(args: string[]): Promise<void> {
  const { memoryLimit, factor, size } = clusterSize(args);
  const queries = flag(args, '--queries', 'q1,q3').split(',') as TpchQuery[];
  for (const query of queries) if (query !== 'q1' && query !== 'q3') throw new RangeError(`--queries: q1 or q3, got ${String(query)}`);
  const partitions = defaultPartitions(size, memoryLimit, WORKERS);
  await withScratchDir('spillway-bench-tpch-', async (dir) => {
    console.log(`tpch: ${WORKERS} workers × ${formatBytes(memoryLimit)}, data ${formatBytes(size)} (${factor}× the cluster's memory), ${partitions} partitions, load average ${loadAverage()}`);
    const scale = tpchPlan('q1', { bytes: size, partitions, seed: DEFAULT_SEED }).scale;
    const t0 = performance.now();
    const duckdb = await TpchDuckDB.create(scale, dir);
    console.log(`reference: scale factor ${scale.scaleFactor.toFixed(3)} written to Parquet for DuckDB in ${((performance.now() - t0) / 1000).toFixed(1)} s, load average ${loadAverage()}`);
    const runLocal = await builtRunLocal();
    const lines: string[][] = [['query', 'spillway compute', 'DuckDB', 'ratio', 'equal to DuckDB', 'peak RSS / limit', 'loop delay worst / p99', 'spilled']];
    try {
      for (const query of queries) {
        const summary = await runLocal({ workers: WORKERS, memoryLimit, workload: `tpch-${query}`, size, partitions, seed: DEFAULT_SEED, nthreads: 1, localDirectory: dir });
        const runs = [];
        for (let i = 0; i < 2; i++) runs.push(query === 'q1' ? await duckdb.q1() : await duckdb.q3());
        const reference = runs[0].seconds <= runs[1].seconds ? runs[0] : runs[1];
        const same = query === 'q1' ? { ...compareRows(summary.rows ?? [], reference.rows), ties: 0 } : await duckdb.checkQ3((summary.rows ?? []) as Q3Row[], reference.rows as Q3Row[]);
        if (same.ties > 0) console.log(`${query}: ${same.ties} row(s) an order tied with DuckDB's (same revenue, date and priority), checked with DuckDB`);
        const highest = summary.workers.reduce((a, b) => (b.peakRss / b.memoryLimit > a.peakRss / a.memoryLimit ? b : a));
        const peak = highest.peakRss / highest.memoryLimit;
        const delay = Math.max(...summary.workers.map((w) => w.maxEventLoopDelayMs));
        const p99 = Math.max(...summary.workers.map((w) => w.p99EventLoopDelayMs));
        const spilled = summary.workers.reduce((n, w) => n + w.spilledBytes, 0);
        if (!summary.verified) console.log(`${query}: not verified: ${summary.problems.slice(0, 3).join('; ')}`);
        if (!same.verified) console.log(`${query}: differs from DuckDB: ${same.problems.slice(0, 3).join('; ')}`);
        console.log(`${query}: compute ${summary.computeSeconds.toFixed(1)} s, DuckDB ${runs.map((r) => r.seconds.toFixed(2)).join(' / ')} s, load average ${loadAverage()}`);
        lines.push([
          query,
          `${summary.computeSeconds.toFixed(1)} s`,
          `${reference.seconds.toFixed(2)} s`,
          `${(summary.computeSeconds / reference.seconds).toFixed(1)}×`,
          same.verified && summary.verified ? (same.ties > 0 ? `yes (${same.ties} tied)` : 'yes') : 'NO',
          `${formatBytes(highest.peakRss)} / ${formatBytes(highest.memoryLimit)} = ${peak.toFixed(3)} ${peak <= 1 ? 'PASS' : 'FAIL'}`,
          `${delay.toFixed(0)} / ${p99.toFixed(0)} ms`,
          formatBytes(spilled),
        ]);
      }
    } finally {
      duckdb.close();
    }
    const widths = lines[0].map((_, c) => Math.max(...lines.map((l) => l[c].length)));
    for (const line of lines) console.log(line.map((cell, c) => cell.padEnd(widths[c])).join('  '));
    console.log(`load average at the end ${loadAverage()}`);
  });
}
