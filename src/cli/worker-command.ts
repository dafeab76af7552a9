import { once } from 'node:events';
import { Worker } from '../worker/index.js';
import { announce, resolveToken, runUntilStopped } from './options.js';

export interface WorkerFlags {
  scheduler: { host: string; port: number };
  memoryLimit: number;
  nthreads?: number;
  threadNice?: number;
  localDirectory?: string;
  token?: string;
  host: string;
  port: number;
  name?: string;
  httpPort?: number;
}

/** `spillway worker`: runs until stopped or until it loses the scheduler; announces `{"event":"ready",...}`. */
export async function workerCommand(flags: WorkerFlags): Promise<void> {
  const worker = await Worker.start({
    scheduler: flags.scheduler,
    token: resolveToken(flags.token),
    memoryLimit: flags.memoryLimit,
    nthreads: flags.nthreads,
    threadNice: flags.threadNice,
    localDirectory: flags.localDirectory,
    host: flags.host,
    port: flags.port,
    name: flags.name,
    httpPort: flags.httpPort,
  });
  announce('ready', { workerId: worker.workerId, name: worker.name, data: worker.server.address, httpAddress: worker.httpAddress ?? null, pid: process.pid });
  runUntilStopped('worker', () => worker.close(), once(worker, 'close'));
}
