import os from 'node:os';
import { FolderOwner } from '../folders/owner.js';
import { reclaimStaleFolders } from '../folders/reclaim.js';
import { createLogger } from '../log.js';
import { formatBytes } from '../units.js';
import { type DemoSummary, runDemo } from './demo.js';
import { EXIT_FAILED, resolveLogLevel } from './options.js';
import { createProgress } from './progress.js';

export interface DemoFlags {
  memoryLimit: number;
  valueSize: number;
  data?: number;
  directory?: string;
  monitorIntervalMs: number;
  seed: number;
  json: boolean;
  logLevel?: string;
}

function printSummary(s: DemoSummary): void {
  const rate = (bytesPerSecond: number): string => `${formatBytes(bytesPerSecond)}/s`;
  const lines = [
    `Spillway store demo: ${s.keys} keys × ${formatBytes(s.valueSize)} = ${formatBytes(s.dataBytes)} through a ${formatBytes(s.memoryLimit)} memory limit`,
    `  write      ${rate(s.write.throughput)} (${s.write.seconds.toFixed(2)} s, generating included)`,
    `  read       ${rate(s.read.throughput)} (${s.read.seconds.toFixed(2)} s, verifying included)`,
    `  spilled    ${formatBytes(s.spilledBytes)} in ${s.diskWrites} writes; unspilled ${formatBytes(s.unspilledBytes)} in ${s.diskReads} reads`,
    `  memory     peak RSS ${formatBytes(s.peakRss)}, peak held by the store ${formatBytes(s.peakResidentBytes)}, ${s.pauses} pauses`,
    `  event loop worst delay ${s.eventLoop.maxDelayMs.toFixed(1)} ms, p99 ${s.eventLoop.p99DelayMs.toFixed(1)} ms (gaps between ${s.eventLoop.resolutionMs} ms ticks), utilisation ${(100 * s.eventLoop.utilization).toFixed(0)}%`,
    s.storeErrors > 0 ? `  errors     ${s.storeErrors} store errors (values kept in memory)` : undefined,
    s.verified
      ? `  verified   every byte of ${s.keys} keys: OK`
      : `  verified   FAILED: ${s.badKeyCount} keys differ (${s.badKeys.join(', ')}${s.badKeyCount > s.badKeys.length ? ', …' : ''})`,
  ];
  process.stdout.write(lines.filter((l) => l !== undefined).join('\n') + '\n');
}

export async function demoCommand(flags: DemoFlags): Promise<void> {
  // The store spills into a folder of our own, so that Ctrl-C (which skips store.close())
  // can remove the gigabytes it holds instead of leaving them in the temp directory.
  // Owned like every spill folder, so a demo killed outright is reclaimed by the next start.
  const parent = flags.directory ?? os.tmpdir();
  await reclaimStaleFolders(parent);
  const folder = await FolderOwner.create(parent, 'spillway-demo-');
  const scratch = folder.directory;
  const onSignal = (signal: NodeJS.Signals): void => {
    void folder.release().finally(() => process.exit(128 + os.constants.signals[signal]));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('SIGHUP', onSignal);
  const progress = createProgress(!flags.json);
  let summary: DemoSummary;
  try {
    summary = await runDemo({
      memoryLimit: flags.memoryLimit,
      valueSize: flags.valueSize,
      dataSize: flags.data,
      directory: scratch,
      monitorIntervalMs: flags.monitorIntervalMs,
      seed: flags.seed,
      onProgress: (phase, done, total) => progress.update(phase, done, total),
      logger: createLogger('spillway-demo', resolveLogLevel(flags.logLevel)),
    });
  } finally {
    progress.stop();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('SIGHUP', onSignal);
    await folder.release();
  }
  if (flags.json) process.stdout.write(JSON.stringify(summary) + '\n');
  else printSummary(summary);
  if (!summary.verified) process.exitCode = EXIT_FAILED;
}

