import { once } from 'node:events';
import type { DataAddress } from '../cluster/protocol.js';
import type { MemoryLimitSpec } from '../worker/memory-limit.js';
import { Worker } from '../worker/index.js';
import { announce, resolveToken, runUntilStopped } from './options.js';
import { type SecurityFlags, tlsFromFlags } from './security-flags.js';

export interface WorkerFlags extends SecurityFlags {
  scheduler: DataAddress;
  memoryLimit: MemoryLimitSpec;
  target?: number | false;
  spill?: number | false;
  pause?: number | false;
  maxSpill?: number | false;
  nthreads?: number;
  threadNice?: number;
  localDirectory?: string;
  token?: string;
  host: string;
  port: number;
  contactAddress?: DataAddress;
  name?: string;
  httpPort?: number;
  connectTimeout: number;
  allowModules?: string;
}

/**
 * `spillway worker`: runs until stopped, or until it has lost the scheduler and cannot reach
 * it again within --connect-timeout; announces `{"event":"ready",...}`, then
 * `{"event":"reconnected",...}` after each new registration.
 */
export async function workerCommand(flags: WorkerFlags): Promise<void> {
  const worker = await Worker.start({
    scheduler: flags.scheduler,
    token: resolveToken(flags.token),
    tls: await tlsFromFlags(flags),
    insecure: flags.insecure === true,
    httpHost: flags.httpHost,
    httpToken: resolveToken(flags.httpToken),
    memoryLimit: flags.memoryLimit,
    target: flags.target,
    spill: flags.spill,
    pause: flags.pause,
    maxSpill: flags.maxSpill,
    nthreads: flags.nthreads,
    threadNice: flags.threadNice,
    localDirectory: flags.localDirectory,
    host: flags.host,
    port: flags.port,
    contactAddress: flags.contactAddress,
    name: flags.name,
    httpPort: flags.httpPort,
    schedulerConnectTimeoutMs: flags.connectTimeout,
    allowModules: flags.allowModules,
  });
  // Signal handlers before the announcements: a parent that signals as soon as it reads a
  // line must find them installed.
  runUntilStopped('worker', () => worker.close(), once(worker, 'close'));
  const { folders, bytes } = worker.reclaimed;
  if (folders.length > 0) announce('reclaimed', { folders: folders.map((f) => ({ path: f.path, bytes: f.bytes, pid: f.owner.pid })), bytes });
  announce('ready', { workerId: worker.workerId, name: worker.name, data: worker.address, httpAddress: worker.httpAddress ?? null, memoryLimit: worker.store.memoryLimit, pid: process.pid });
  worker.on('disconnected', (err?: Error) => announce('disconnected', { reason: err?.message ?? 'connection closed' }));
  worker.on('reconnected', (info: Record<string, unknown>) => announce('reconnected', info));
}
