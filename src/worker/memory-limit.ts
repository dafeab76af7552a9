import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { InvalidArgumentError } from '../errors.js';
import { parseBytes } from '../units.js';

/** A worker's memory limit as given: bytes, a size ('4Gi', '512 MiB'), 'auto', or a fraction of 'auto' ('0.5'). */
export type MemoryLimitSpec = number | string;

export interface HostMemory {
  bytes: number;
  source: 'cgroup v2' | 'cgroup v1' | 'total memory';
}

export interface HostMemoryOptions {
  /** Where the cgroup file systems are mounted. Default /sys/fs/cgroup. */
  cgroupRoot?: string;
  /** The text of /proc/self/cgroup. Default: read it. */
  procSelfCgroup?: string;
  /** Total memory. Default os.totalmem(). */
  totalMemory?: number;
}

/** cgroup v1 writes a number near 2^63 for "no limit". */
const V1_UNLIMITED = 2 ** 60;

/** Whether a spec names a fraction of the host's memory ('0.5', 0.25) rather than bytes. */
function fractionOf(spec: MemoryLimitSpec): number | undefined {
  if (typeof spec === 'number') return spec > 0 && spec < 1 ? spec : undefined;
  const text = spec.trim();
  if (!/^(0?\.\d+|0\.\d*|1\.0*)$/.test(text)) return undefined;
  const fraction = Number(text);
  return fraction > 0 && fraction <= 1 ? fraction : undefined;
}

/** Checks a spec's syntax without reading the host (for command-line parsing). */
export function checkMemoryLimitSpec(spec: MemoryLimitSpec): void {
  if (typeof spec === 'string' && spec.trim().toLowerCase() === 'auto') return;
  if (fractionOf(spec) !== undefined) return;
  if (parseBytes(spec, 'memoryLimit') <= 0) throw new InvalidArgumentError('memoryLimit must be more than 0 bytes');
}

/**
 * Resolves a memory limit: 'auto' is the container's limit (cgroup v2, else v1) or else the
 * host's total memory, shared among `workersOnHost` workers; a fraction is that share of it.
 */
export async function resolveMemoryLimit(spec: MemoryLimitSpec, options: HostMemoryOptions & { workersOnHost?: number } = {}): Promise<number> {
  const workers = options.workersOnHost ?? 1;
  if (!Number.isInteger(workers) || workers < 1) throw new InvalidArgumentError(`workersOnHost must be a positive integer, got ${workers}`);
  const auto = typeof spec === 'string' && spec.trim().toLowerCase() === 'auto';
  const fraction = auto ? 1 : fractionOf(spec);
  if (fraction === undefined) {
    const bytes = parseBytes(spec, 'memoryLimit');
    if (bytes <= 0) throw new InvalidArgumentError('memoryLimit must be more than 0 bytes');
    return bytes;
  }
  const host = await hostMemory(options);
  return Math.max(1, Math.floor((host.bytes * fraction) / workers));
}

/** The memory this process may use: the tightest cgroup limit above it, else the host's total memory. */
export async function hostMemory(options: HostMemoryOptions = {}): Promise<HostMemory> {
  const root = options.cgroupRoot ?? '/sys/fs/cgroup';
  const total = options.totalMemory ?? os.totalmem();
  const cgroups = options.procSelfCgroup ?? (await readFile('/proc/self/cgroup', 'utf8').catch(() => ''));
  const lines = cgroups.split('\n').map((line) => line.split(':'));
  const v2 = lines.find((parts) => parts.length >= 3 && parts[0] === '0' && parts[1] === '');
  if (v2 !== undefined) {
    const limit = await tightest(root, parts(v2), 'memory.max', (text) => (text === 'max' ? undefined : Number(text)));
    if (limit !== undefined) return { bytes: Math.min(limit, total), source: 'cgroup v2' };
  }
  const v1 = lines.find((p) => p.length >= 3 && p[1].split(',').includes('memory'));
  if (v1 !== undefined) {
    const limit = await tightest(path.join(root, 'memory'), parts(v1), 'memory.limit_in_bytes', (text) => {
      const n = Number(text);
      return n >= V1_UNLIMITED ? undefined : n;
    });
    if (limit !== undefined) return { bytes: Math.min(limit, total), source: 'cgroup v1' };
  }
  return { bytes: total, source: 'total memory' };
}

function parts(line: string[]): string {
  return line.slice(2).join(':').trim() || '/';
}

/**
 * The smallest limit in the cgroup and its ancestors. Inside a container the cgroup's own
 * path is often not mounted (only its root is), so the mount's root is read too.
 */
async function tightest(mount: string, cgroup: string, file: string, read: (text: string) => number | undefined): Promise<number | undefined> {
  const dirs = new Set<string>([mount]);
  for (let dir = cgroup; ; dir = path.posix.dirname(dir)) {
    dirs.add(path.join(mount, dir));
    if (dir === '/' || dir === '.' || dir === '') break;
  }
  let best: number | undefined;
  for (const dir of dirs) {
    const text = await readFile(path.join(dir, file), 'utf8').catch(() => undefined);
    if (text === undefined) continue;
    const limit = read(text.trim());
    if (limit !== undefined && Number.isFinite(limit) && limit > 0) best = best === undefined ? limit : Math.min(best, limit);
  }
  return best;
}
