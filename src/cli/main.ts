#!/usr/bin/env node
/**
 * `spillway` command line. Exit codes: 0 success, 1 failure (verification or runtime),
 * 2 bad arguments.
 */
import { Command, CommanderError, InvalidArgumentError as BadOption } from 'commander';
import { InvalidArgumentError } from '../errors.js';
import { formatBytes, parseBytes } from '../units.js';
import { type DemoSummary, runDemo } from './demo.js';
import { createProgress } from './progress.js';

const EXIT_FAILED = 1;
const EXIT_USAGE = 2;

/** Commander argument parser for sizes: '256MiB', '1.5 GB', '4096'. */
function size(value: string): number {
  try {
    const bytes = parseBytes(value, 'size');
    if (bytes <= 0) throw new InvalidArgumentError('must be more than 0 bytes');
    return bytes;
  } catch (err) {
    throw new BadOption(`${err instanceof Error ? err.message : String(err)}`);
  }
}

function milliseconds(value: string): number {
  const ms = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(ms)) throw new BadOption(`expected a whole number of milliseconds, got ${JSON.stringify(value)}`);
  return ms;
}

interface DemoFlags {
  memoryLimit: number;
  valueSize: number;
  data?: number;
  directory?: string;
  monitorInterval: number;
  seed: number;
  json: boolean;
}

function printSummary(s: DemoSummary): void {
  const rate = (bytesPerSecond: number): string => `${formatBytes(bytesPerSecond)}/s`;
  const lines = [
    `Spillway store demo: ${s.keys} keys × ${formatBytes(s.valueSize)} = ${formatBytes(s.dataBytes)} through a ${formatBytes(s.memoryLimit)} memory limit`,
    `  write      ${rate(s.write.throughput)} (${s.write.seconds.toFixed(2)} s, generating included)`,
    `  read       ${rate(s.read.throughput)} (${s.read.seconds.toFixed(2)} s, verifying included)`,
    `  spilled    ${formatBytes(s.spilledBytes)} in ${s.diskWrites} writes; unspilled ${formatBytes(s.unspilledBytes)} in ${s.diskReads} reads`,
    `  memory     peak RSS ${formatBytes(s.peakRss)}, peak held by the store ${formatBytes(s.peakResidentBytes)}, ${s.pauses} pauses`,
    `  event loop worst delay ${s.eventLoop.maxDelayMs.toFixed(1)} ms, p99 ${s.eventLoop.p99DelayMs.toFixed(1)} ms above the ${s.eventLoop.resolutionMs} ms sampling, utilisation ${(100 * s.eventLoop.utilization).toFixed(0)}%`,
    s.storeErrors > 0 ? `  errors     ${s.storeErrors} store errors (values kept in memory)` : undefined,
    s.verified
      ? `  verified   every byte of ${s.keys} keys: OK`
      : `  verified   FAILED: ${s.badKeyCount} keys differ (${s.badKeys.join(', ')}${s.badKeyCount > s.badKeys.length ? ', …' : ''})`,
  ];
  process.stdout.write(lines.filter((l) => l !== undefined).join('\n') + '\n');
}

async function demo(flags: DemoFlags): Promise<void> {
  const progress = createProgress(!flags.json);
  let summary: DemoSummary;
  try {
    summary = await runDemo({
      memoryLimit: flags.memoryLimit,
      valueSize: flags.valueSize,
      dataSize: flags.data,
      directory: flags.directory,
      monitorInterval: flags.monitorInterval,
      seed: flags.seed,
      onProgress: (phase, done, total) => progress.update(phase, done, total),
    });
  } finally {
    progress.stop();
  }
  if (flags.json) process.stdout.write(JSON.stringify(summary) + '\n');
  else printSummary(summary);
  if (!summary.verified) process.exitCode = EXIT_FAILED;
}

const program = new Command()
  .name('spillway')
  .description('Spillway: a memory-bounded, spill-to-disk object store for Node.js')
  .showHelpAfterError('(run with --help for usage)')
  // Commander's own usage errors (unknown option, missing value, bad size) exit with 2.
  .exitOverride((err: CommanderError) => process.exit(err.exitCode === 0 ? 0 : EXIT_USAGE));

program
  .command('demo')
  .description('push a data set 4× larger than the memory limit through a SpillStore, read it back and verify every byte')
  .option('--memory-limit <size>', 'memory limit of the store', size, 256 * 2 ** 20)
  .option('--value-size <size>', 'size of each value', size, 8 * 2 ** 20)
  .option('--data <size>', 'bytes to push through (default: 4 × the memory limit)', size)
  .option('--directory <path>', 'parent directory for spill files (default: the OS temp directory)')
  .option('--monitor-interval <ms>', 'RSS monitor interval in ms; 0 = off, pausing then follows the bytes the store holds', milliseconds, 100)
  .option('--seed <n>', 'seed of the generated content', milliseconds, 0x5eed)
  .option('--json', 'print a one-line JSON summary instead of text (no progress bar)', false)
  .action(async (flags: DemoFlags) => {
    try {
      await demo(flags);
    } catch (err) {
      const usage = err instanceof InvalidArgumentError;
      process.stderr.write(`spillway demo: ${usage ? 'error: ' : ''}${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = usage ? EXIT_USAGE : EXIT_FAILED;
    }
  });

await program.parseAsync(process.argv);
