import { rm } from 'node:fs/promises';
import os from 'node:os';
import { killLocalClustersAndWait } from '../client/local-cluster.js';
import type { WorkerRunStats } from '../client/monitor.js';
import { formatBytes } from '../units.js';
import { type LocalOptions, type LocalSummary, runLocal } from './local.js';
import { createClusterProgress } from './local-progress.js';
import { EXIT_FAILED } from './options.js';

/** The command line's options: the job's own, plus how to print. */
export interface LocalFlags extends Omit<LocalOptions, 'seed' | 'onSample' | 'onStarted'> {
  seed: number;
  json: boolean;
}

function printSummary(s: LocalSummary): void {
  const ratio = (a: number, b: number): string => (b > 0 ? (a / b).toFixed(2) : '-');
  const lines = [
    `Spillway ${s.workload}${s.method === undefined ? '' : ` (${s.method})`}: ${formatBytes(s.dataBytes)} in ${s.partitions} partitions on ${s.workers.length} workers × ${formatBytes(s.workers[0]?.memoryLimit ?? 0)} (${ratio(s.dataBytes, s.clusterMemoryLimit)}× the cluster's memory)`,
    `  time       ${s.wallSeconds.toFixed(1)} s (compute ${s.computeSeconds.toFixed(1)} s, verify ${s.verifySeconds.toFixed(1)} s; cluster start ${s.startupSeconds.toFixed(1)} s)`,
    `  tasks      ${s.tasks.done} of ${s.tasks.total} seen done${s.tasks.erred > 0 ? `, ${s.tasks.erred} erred` : ''}`,
    ...s.workers.map(
      (w) =>
        `  ${w.name.padEnd(10)} peak RSS ${formatBytes(w.peakRss)} (${ratio(w.peakRss, w.memoryLimit)} of its limit), spilled ${formatBytes(w.spilledBytes)} (at most ${formatBytes(w.peakDiskBytes)} on disk at once), ` +
        `unspilled ${formatBytes(w.unspilledBytes)}, served from disk ${formatBytes(w.servedFromDiskBytes)} / memory ${formatBytes(w.servedFromMemoryBytes)}, ` +
        `event-loop delay worst ${w.maxEventLoopDelayMs.toFixed(0)} ms, p99 ${w.p99EventLoopDelayMs.toFixed(0)} ms${loopTimes(w)}${w.restarts > 0 ? ` (restarted ${w.restarts}×)` : ''}${w.alive ? '' : ' (exited)'}`,
    ),
    s.verified ? '  verified   OK' : `  verified   FAILED: ${s.problems.slice(0, 5).join('; ')}`,
    ...(s.rows === undefined ? [] : ['', ...formatRows(s.rows)]),
  ];
  process.stdout.write(lines.join('\n') + '\n');
}

/** The loop thread's time on a core and waiting for one, where the worker reports it. */
function loopTimes(w: WorkerRunStats): string {
  if (w.loopRunSeconds === null || w.loopWaitSeconds === null) return '';
  return ` (its loop ran ${w.loopRunSeconds.toFixed(1)} s, waited ${w.loopWaitSeconds.toFixed(1)} s for a core)`;
}

/** A query's rows as an aligned text table. */
function formatRows(rows: readonly object[]): string[] {
  if (rows.length === 0) return ['(no rows)'];
  const columns = Object.keys(rows[0]);
  const cells = rows.map((row) => columns.map((c) => String((row as Record<string, unknown>)[c])));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i].length)));
  const line = (values: string[]): string => values.map((v, i) => v.padStart(widths[i])).join('  ');
  return [line(columns), ...cells.map(line)];
}

/** `spillway local`: a workload on a local cluster; exit code 1 unless it completed and verified. */
export async function localCommand(flags: LocalFlags): Promise<void> {
  // Killed by a signal (SIGHUP: the terminal closed), exit at once but take the cluster and
  // its folders along: a child whose event loop is stuck would not notice its parent is
  // gone. A second signal exits without waiting for the folders.
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      const code = 128 + os.constants.signals[signal];
      if (stopping) process.exit(code);
      stopping = true;
      void killLocalClustersAndWait()
        .then((folders) => Promise.allSettled(folders.map((dir) => rm(dir, { recursive: true, force: true, maxRetries: 3 }))))
        .finally(() => process.exit(code));
    });
  }
  const progress = createClusterProgress(flags.workload, !flags.json);
  let summary: LocalSummary;
  try {
    summary = await runLocal({
      workers: flags.workers,
      memoryLimit: flags.memoryLimit,
      workload: flags.workload,
      size: flags.size,
      partitions: flags.partitions,
      method: flags.method,
      nthreads: flags.nthreads,
      localDirectory: flags.localDirectory,
      httpPort: flags.httpPort,
      seed: flags.seed,
      tls: flags.tls === true,
      // Before the progress bar: where to watch the run. On stderr with --json, whose stdout is one line.
      onStarted: (cluster) => {
        if (cluster.httpAddress !== undefined) (flags.json ? process.stderr : process.stdout).write(`dashboard: ${cluster.httpAddress}/status\n`);
      },
      logLevel: flags.logLevel,
      onSample: (sample) => progress.update(sample),
    });
  } finally {
    progress.stop();
  }
  if (flags.json) process.stdout.write(JSON.stringify(summary) + '\n');
  else printSummary(summary);
  if (!summary.completed || !summary.verified) process.exitCode = EXIT_FAILED;
}
