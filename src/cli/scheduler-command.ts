import { Scheduler } from '../scheduler/index.js';
import { httpUrl } from '../http/server.js';
import { announce, resolveToken, runUntilStopped } from './options.js';

export interface SchedulerFlags {
  host: string;
  port: number;
  httpPort?: number;
  token?: string;
  heartbeatInterval?: number;
  allowedFailures?: number;
  withoutWorkersTimeout?: number;
}

/** `spillway scheduler`: serves until stopped; its first stdout line is `{"event":"listening",...}`. */
export async function schedulerCommand(flags: SchedulerFlags): Promise<void> {
  const scheduler = await Scheduler.start({
    host: flags.host,
    port: flags.port,
    token: resolveToken(flags.token),
    httpPort: flags.httpPort,
    heartbeatIntervalMs: flags.heartbeatInterval,
    allowedFailures: flags.allowedFailures,
    noWorkersTimeoutMs: flags.withoutWorkersTimeout,
  });
  announce('listening', { address: scheduler.address, httpAddress: scheduler.httpAddress ?? null, pid: process.pid });
  if (scheduler.httpAddress !== undefined) process.stdout.write(`dashboard: ${httpUrl(scheduler.httpAddress, '/status')}\n`);
  runUntilStopped('scheduler', () => scheduler.close());
}
