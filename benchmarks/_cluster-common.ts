/**
 * What the benchmarks on a local cluster share (cluster.ts, tpch.ts; files starting with `_`
 * are not benchmarks of their own): their options, the built `runLocal` and a scratch folder;
 * and `loadAverage`, which the store, tiers, worker and TPC-H benchmarks print.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import type { runLocal } from '../src/cli/local.js';
import { parseBytes } from '../src/units.js';

/** Worker processes of every cluster benchmark: the smallest cluster with a peer to shuffle with. */
export const WORKERS = 2;

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The value after `name` in `args`, or `fallback`. */
export function flag(args: readonly string[], name: string, fallback: string): string {
  const at = args.indexOf(name);
  return at >= 0 && args[at + 1] !== undefined ? args[at + 1] : fallback;
}

/** `--memory-limit` (per worker) and `--factor` (data as a multiple of the cluster's memory). */
export interface ClusterSize {
  memoryLimit: number;
  factor: number;
  /** Bytes of data: factor × workers × memory limit. */
  size: number;
}

export function clusterSize(args: readonly string[]): ClusterSize {
  const memoryLimit = parseBytes(flag(args, '--memory-limit', '256MiB'), 'memory limit');
  const factor = Number(flag(args, '--factor', '4'));
  if (!(factor > 0)) throw new RangeError(`--factor must be a positive number, got ${flag(args, '--factor', '')}`);
  return { memoryLimit, factor, size: Math.round(factor * WORKERS * memoryLimit) };
}

/**
 * The cluster runs the built JavaScript, as users run it (the package's exports are
 * `dist/`): from source every process also carries tsx, ~40 MiB of a worker's RSS.
 */
export async function builtRunLocal(): Promise<typeof runLocal> {
  await promisify(execFile)('npm', ['run', 'build', '--silent'], { cwd: ROOT });
  const built = (await import(pathToFileURL(path.join(ROOT, 'dist', 'cli', 'local.js')).href)) as typeof import('../src/cli/local.js');
  return built.runLocal;
}

/** The 1, 5 and 15 minute load averages (this machine is shared: every figure is printed with them). */
export function loadAverage(): string {
  return os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
}

/** Runs `body` with a fresh folder under the system's temporary folder, removed afterwards. */
export async function withScratchDir<T>(prefix: string, body: (dir: string) => Promise<T>): Promise<T> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), prefix));
  try {
    return await body(dir);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}
