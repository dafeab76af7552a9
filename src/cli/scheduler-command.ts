import { createLogger } from '../log.js';
import { Scheduler } from '../scheduler/index.js';
import { httpUrl } from '../http/server.js';
import { announce, resolveLogLevel, resolveToken, runUntilStopped } from './options.js';
import { type SecurityFlags, tlsFromFlags } from './security-flags.js';

export interface SchedulerFlags extends SecurityFlags {
  allowModules?: string;
  host: string;
  port: number;
  httpPort?: number;
  token?: string;
  heartbeatInterval?: number;
  allowedFailures?: number;
  withoutWorkersTimeout?: number;
  moduleCacheLimit?: number;
  logLevel?: string;
}

/** `spillway scheduler`: serves until stopped; its first stdout line is `{"event":"listening",...}`. */
export async function schedulerCommand(flags: SchedulerFlags): Promise<void> {
  const scheduler = await Scheduler.start({
    host: flags.host,
    port: flags.port,
    token: resolveToken(flags.token),
    tls: await tlsFromFlags(flags),
    insecure: flags.insecure === true,
    allowModules: flags.allowModules,
    httpPort: flags.httpPort,
    httpHost: flags.httpHost,
    httpToken: resolveToken(flags.httpToken),
    heartbeatIntervalMs: flags.heartbeatInterval,
    allowedFailures: flags.allowedFailures,
    noWorkersTimeoutMs: flags.withoutWorkersTimeout,
    moduleCacheLimit: flags.moduleCacheLimit,
    logger: createLogger('spillway-scheduler', resolveLogLevel(flags.logLevel)),
  });
  // Signal handlers before the announcement: a parent that signals as soon as it reads the
  // line must find them installed.
  runUntilStopped('scheduler', () => scheduler.close());
  announce('listening', { address: scheduler.address, httpAddress: scheduler.httpAddress ?? null, tls: flags.tlsCert !== undefined, pid: process.pid });
  if (scheduler.httpAddress !== undefined) {
    // The token itself is not printed (logs keep stdout): the user who set it adds it to the link.
    const hint = flags.httpToken === undefined || flags.httpToken === '' ? '' : ' (open it with ?access_token=<the HTTP token>)';
    process.stdout.write(`dashboard: ${httpUrl(scheduler.httpAddress, '/status')}${hint}\n`);
  }
}
