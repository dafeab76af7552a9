import { checkExposure, parseAllowModules } from '../cluster/security.js';
import type { DashboardOptions } from '../dashboard/dashboard.js';
import { InvalidArgumentError } from '../errors.js';
import type { HttpLimits } from '../http/server.js';
import { type TlsConfig, checkTlsConfig } from '../transfer/tls.js';
import { parseBytes } from '../units.js';
import type { Logger } from './log.js';

export interface SchedulerOptions {
  host?: string;
  port?: number;
  token?: string;
  /** TLS on the control port; with a CA, workers and clients must present a certificate it signed. */
  tls?: TlsConfig;
  /** Listen beyond loopback without a token or TLS with a CA (refused otherwise: InsecureBindError). */
  insecure?: boolean;
  /**
   * Module prefixes tasks may name (`['file:///srv/jobs/', 'node:']`, or that comma-separated);
   * a graph naming any other fails with GraphError before anything of it runs. Default: any.
   */
  allowModules?: readonly string[] | string;
  /**
   * Bytes of shipped modules (`client.uploadModule`) the scheduler keeps and sends to each
   * worker that registers; beyond it the least recently used are dropped (docs/code-shipping.md).
   * Default '64 MiB'.
   */
  moduleCacheLimit?: number | string;
  /** Serve /metrics, /api/state, /health and the dashboard (/status) here: 0 = any free port; undefined = no HTTP. */
  httpPort?: number;
  /** The dashboard's update interval and limits (docs/dashboard.md). */
  dashboard?: DashboardOptions;
  /** Interface of the HTTP server. Default: `host`. */
  httpHost?: string;
  /** Bearer token /metrics and /api/state require (`Authorization: Bearer <token>`); /health stays open for probes. */
  httpToken?: string;
  heartbeatIntervalMs?: number;
  /** A worker silent for this long is removed. Default 5 × heartbeatIntervalMs. */
  workerTimeoutMs?: number;
  /** Worker deaths a running task survives before it fails with SPW_ERR_KILLED_WORKER. Default 3. */
  allowedFailures?: number;
  /** Ready tasks with no worker to run them for this long fail with SPW_ERR_NO_WORKERS (ms). Default 120 s; 0: they wait forever. */
  noWorkersTimeoutMs?: number;
  /** An authenticated control connection that has not registered as a worker or a client this long is closed (ms). Default 10 s. */
  registerTimeoutMs?: number;
  /** Limits of the HTTP endpoint: header and request deadlines, connections at once. */
  http?: HttpLimits;
  /** Default: silent, unless SPILLWAY_LOG_LEVEL names a pino level (then pino on stderr). */
  logger?: Logger;
}

/** The options with their defaults, checked. */
export interface ResolvedSchedulerOptions extends SchedulerOptions {
  host: string;
  heartbeatIntervalMs: number;
  workerTimeoutMs: number;
  allowedFailures: number;
  registerTimeoutMs: number;
  noWorkersTimeoutMs: number;
  allowModules: readonly string[] | undefined;
  moduleCacheLimit: number;
}

/** Checks the options (InvalidArgumentError, InsecureBindError) and fills in the defaults. */
export function resolveSchedulerOptions(options: SchedulerOptions): ResolvedSchedulerOptions {
  const interval = options.heartbeatIntervalMs ?? 1000;
  if (!(interval > 0)) throw new InvalidArgumentError('heartbeatIntervalMs must be a positive number');
  if (options.workerTimeoutMs !== undefined && !(options.workerTimeoutMs > 0)) throw new InvalidArgumentError('workerTimeoutMs must be a positive number');
  const allowedFailures = options.allowedFailures ?? 3;
  if (!Number.isSafeInteger(allowedFailures) || allowedFailures < 0) throw new InvalidArgumentError(`allowedFailures must be a whole number, got ${String(options.allowedFailures)}`);
  if (options.registerTimeoutMs !== undefined && !(Number.isSafeInteger(options.registerTimeoutMs) && options.registerTimeoutMs > 0)) {
    throw new InvalidArgumentError(`registerTimeoutMs must be a positive whole number of milliseconds, got ${String(options.registerTimeoutMs)}`);
  }
  if (options.noWorkersTimeoutMs !== undefined && !(Number.isFinite(options.noWorkersTimeoutMs) && options.noWorkersTimeoutMs >= 0)) {
    throw new InvalidArgumentError(`noWorkersTimeoutMs must be a number of milliseconds (0: off), got ${String(options.noWorkersTimeoutMs)}`);
  }
  const host = options.host ?? '127.0.0.1';
  if (options.tls !== undefined) checkTlsConfig(options.tls);
  checkExposure('scheduler', host, options);
  const allowModules = parseAllowModules(options.allowModules);
  const moduleCacheLimit = parseBytes(options.moduleCacheLimit ?? '64 MiB', 'moduleCacheLimit');
  if (options.httpToken !== undefined && options.httpToken === '') throw new InvalidArgumentError('httpToken must not be empty');
  return {
    ...options,
    host,
    heartbeatIntervalMs: interval,
    workerTimeoutMs: options.workerTimeoutMs ?? 5 * interval,
    allowedFailures,
    registerTimeoutMs: options.registerTimeoutMs ?? 10_000,
    noWorkersTimeoutMs: options.noWorkersTimeoutMs ?? 120_000,
    allowModules,
    moduleCacheLimit,
  };
}
