import os from 'node:os';
import type { DataAddress } from '../cluster/protocol.js';
import { InvalidArgumentError } from '../errors.js';
import type { Logger } from '../log.js';
import { DEFAULT_LEVELS, type SpillStoreOptions } from '../store/options.js';
import { parseBytes } from '../units.js';
import { parseAllowModules } from '../cluster/security.js';
import type { MemoryLimitSpec } from './memory-limit.js';
import type { TlsConfig } from '../transfer/tls.js';

export interface WorkerOptions extends Pick<SpillStoreOptions, 'target' | 'spill' | 'pause' | 'monitorIntervalMs' | 'maxSpill' | 'spillConcurrency' | 'collectGarbage'> {
  /** The scheduler's control address. */
  scheduler: DataAddress;
  /** Shared secret of the cluster: the scheduler, peers' DataServers and this worker's. */
  token?: string;
  /** TLS for the scheduler connection and the data plane (both ways); with a CA, mutual TLS. */
  tls?: TlsConfig;
  /** Listen beyond loopback without a token or TLS with a CA (refused otherwise: InsecureBindError). */
  insecure?: boolean;
  /** Bearer token GET /metrics requires; /health stays open for probes. */
  httpToken?: string;
  /**
   * Memory this worker's store may use: bytes, a size ('1 GiB', '4Gi'), 'auto' (the
   * container's cgroup limit, else the host's total memory, divided by workersOnHost) or a
   * fraction of 'auto' ('0.5').
   */
  memoryLimit: MemoryLimitSpec;
  /** Workers sharing this host's memory, for memoryLimit 'auto' and fractions. Default 1. */
  workersOnHost?: number;
  /** Keep trying to reach the scheduler this long (ms), at start and after losing it (`--connect-timeout`). Default 120 s. */
  schedulerConnectTimeoutMs?: number;
  /**
   * After losing the scheduler, connect again and register anew, reporting the keys held
   * (in memory and spilled). Default true; false closes the worker instead.
   */
  reconnect?: boolean;
  /** Threads running tasks. Default os.availableParallelism(). */
  nthreads?: number;
  /** Parent of the spill folder. Default os.tmpdir(). */
  localDirectory?: string;
  /**
   * Write the spill folder's segment files past the page cache (`O_DIRECT`, the `DiskTier`
   * option of the same name; docs/tiers.md, "Direct writes"). Default false: a worker's
   * spilled values are a job's intermediate results, read back by the tasks and peers that
   * need them, most within the job (a shuffle reads every piece it spilled once its inputs
   * are split), and through the page cache those reads come from the host's spare memory
   * instead of the disk. True suits a host whose memory is too short to cache spilled data,
   * or a container whose memory limit counts the page cache.
   */
  directWrites?: boolean;
  /** Interface the DataServer binds (peers must reach it). Default 127.0.0.1. */
  host?: string;
  /** Port of the DataServer. Default any free one. */
  port?: number;
  /**
   * The data address peers are told, when it differs from where the DataServer listens (NAT,
   * a container's published port): `host:port` or { host, port }. Default: the listening
   * address, or this host's first non-loopback address when listening on 0.0.0.0 or ::.
   */
  contactAddress?: DataAddress | string;
  /** Name shown by the scheduler. Default `worker-<pid>-<port>`. */
  name?: string;
  /** Ready tasks ahead whose spilled inputs are read back in advance. Default nthreads; 0 turns it off. */
  prefetch?: number;
  /** Tasks fetching inputs from peers at once. Default 2. */
  fetchConcurrency?: number;
  /** Serve GET /metrics and GET /health on this port (0: any free one). Default: no HTTP server. */
  httpPort?: number;
  /** Interface of that HTTP server. Default: `host`. */
  httpHost?: string;
  /** Overrides the interval the scheduler asks for (ms). */
  heartbeatIntervalMs?: number;
  /** Deadline for connecting to a peer's DataServer and completing the handshake (ms); a peer past it is skipped. Default 5000. */
  connectTimeoutMs?: number;
  /**
   * How long the store may stay paused with spill writes failing (a full disk) and its values
   * over the memory limit before the queued tasks fail with SPW_ERR_DISK_FULL (ms). Default 10000.
   */
  spillFailureTimeoutMs?: number;
  /**
   * How much lower the task threads' CPU priority is than the event loop's (a nice
   * increment, 0-19; Linux only, where nice is per thread). Default 10: when the cores are
   * busy the loop (peers, heartbeats, spilling) runs first and tasks get what is left; 0
   * runs them at the loop's priority.
   */
  threadNice?: number;
  /**
   * Module prefixes this worker runs tasks from (`['file:///srv/jobs/', 'node:']`, or that
   * comma-separated), checked as it runs each task; a shipped module is judged by the URL it
   * was uploaded from (docs/code-shipping.md). Default: any.
   */
  allowModules?: readonly string[] | string;
  /** How long retire() waits for the scheduler to move this worker's data before it closes anyway (ms). Default 30 s. */
  retireTimeoutMs?: number;
  /**
   * Times a supervisor started this worker's slot again before this process, by reason
   * (`exit`: it exited unexpectedly; `memory`: it was killed for passing `terminate`): the
   * worker reports them in its heartbeats and metrics (`spillway_worker_restarts_total`).
   * Default: none (not supervised).
   */
  supervisorRestarts?: Readonly<Record<RestartReason, number>>;
  /** Where the worker logs (a pino logger fits). Default: pino on stderr when SPILLWAY_LOG_LEVEL names a level, else silent. */
  logger?: Logger;
}

/** Why a supervisor started a worker again. */
export type RestartReason = 'exit' | 'memory';
export const RESTART_REASONS: readonly RestartReason[] = ['exit', 'memory'];

export interface ResolvedWorkerOptions extends Omit<WorkerOptions, 'allowModules'> {
  memoryLimit: number;
  schedulerConnectTimeoutMs: number;
  reconnect: boolean;
  nthreads: number;
  host: string;
  prefetch: number;
  fetchConcurrency: number;
  threadNice: number;
  directWrites: boolean;
  allowModules: readonly string[] | undefined;
  retireTimeoutMs: number;
}

export function resolveWorkerOptions(options: WorkerOptions): ResolvedWorkerOptions {
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('worker options must be an object');
  const { scheduler } = options;
  if (typeof scheduler?.host !== 'string' || !Number.isInteger(scheduler.port)) {
    throw new InvalidArgumentError('scheduler must be { host, port }');
  }
  const memoryLimit = parseBytes(options.memoryLimit, 'memoryLimit');
  const nthreads = options.nthreads ?? os.availableParallelism();
  positiveInteger(nthreads, 'nthreads');
  const prefetch = options.prefetch ?? nthreads;
  if (!Number.isInteger(prefetch) || prefetch < 0) throw new InvalidArgumentError(`prefetch must be a non-negative integer, got ${prefetch}`);
  const fetchConcurrency = options.fetchConcurrency ?? 2;
  positiveInteger(fetchConcurrency, 'fetchConcurrency');
  if (options.httpPort !== undefined && (!Number.isInteger(options.httpPort) || options.httpPort < 0 || options.httpPort > 65535)) {
    throw new InvalidArgumentError(`httpPort must be a TCP port (0: any free one), got ${options.httpPort}`);
  }
  if (options.heartbeatIntervalMs !== undefined) positiveInteger(options.heartbeatIntervalMs, 'heartbeatIntervalMs');
  if (options.connectTimeoutMs !== undefined) positiveInteger(options.connectTimeoutMs, 'connectTimeoutMs');
  if (options.spillFailureTimeoutMs !== undefined) positiveInteger(options.spillFailureTimeoutMs, 'spillFailureTimeoutMs');
  const threadNice = options.threadNice ?? 10;
  if (!Number.isInteger(threadNice) || threadNice < 0 || threadNice > 19) {
    throw new InvalidArgumentError(`threadNice must be an integer from 0 to 19, got ${threadNice}`);
  }
  const schedulerConnectTimeoutMs = options.schedulerConnectTimeoutMs ?? 120_000;
  if (!Number.isInteger(schedulerConnectTimeoutMs) || schedulerConnectTimeoutMs < 0) {
    throw new InvalidArgumentError(`schedulerConnectTimeoutMs must be a non-negative integer, got ${schedulerConnectTimeoutMs}`);
  }
  const reconnect = options.reconnect ?? true;
  const directWrites = options.directWrites ?? false;
  if (typeof directWrites !== 'boolean') throw new InvalidArgumentError(`directWrites must be true or false, got ${String(directWrites)}`);
  const allowModules = parseAllowModules(options.allowModules);
  const retireTimeoutMs = options.retireTimeoutMs ?? 30_000;
  if (!(Number.isInteger(retireTimeoutMs) && retireTimeoutMs >= 0 && retireTimeoutMs <= 2 ** 31 - 1)) {
    throw new InvalidArgumentError(`retireTimeoutMs must be a whole number of milliseconds, got ${retireTimeoutMs}`);
  }
  if (options.supervisorRestarts !== undefined) checkRestarts(options.supervisorRestarts);
  return { ...options, memoryLimit, nthreads, host: options.host ?? '127.0.0.1', prefetch, fetchConcurrency, threadNice, directWrites, schedulerConnectTimeoutMs, reconnect, allowModules, retireTimeoutMs };
}

function checkRestarts(restarts: unknown): void {
  const ok = typeof restarts === 'object' && restarts !== null && Object.entries(restarts).every(([reason, n]) => (RESTART_REASONS as readonly string[]).includes(reason) && Number.isSafeInteger(n) && (n as number) >= 0);
  if (!ok) throw new InvalidArgumentError(`supervisorRestarts must map ${RESTART_REASONS.join(' and ')} to whole numbers, got ${JSON.stringify(restarts)}`);
}

/**
 * A supervisor's restart counts as it passes them to a worker it starts
 * (SPILLWAY_SUPERVISOR_RESTARTS, `exit=1,memory=0`), or undefined when the variable is unset.
 */
export function parseSupervisorRestarts(text: string | undefined): Record<RestartReason, number> | undefined {
  if (text === undefined || text.trim() === '') return undefined;
  const counts: Record<RestartReason, number> = { exit: 0, memory: 0 };
  for (const part of text.split(',')) {
    const match = /^\s*([a-z]+)\s*=\s*(\d+)\s*$/.exec(part);
    const reason = match?.[1] as RestartReason | undefined;
    if (match === null || reason === undefined || !RESTART_REASONS.includes(reason) || !Number.isSafeInteger(Number(match[2]))) {
      throw new InvalidArgumentError(`SPILLWAY_SUPERVISOR_RESTARTS must read like exit=1,memory=0, got ${JSON.stringify(text)}`);
    }
    counts[reason] = Number(match[2]);
  }
  return counts;
}

/** The variable a supervisor passes its restart counts of a slot in. */
export function formatSupervisorRestarts(counts: Readonly<Record<RestartReason, number>>): string {
  return RESTART_REASONS.map((reason) => `${reason}=${counts[reason]}`).join(',');
}

function positiveInteger(value: number, name: string): void {
  if (!Number.isInteger(value) || value < 1) throw new InvalidArgumentError(`${name} must be a positive integer, got ${value}`);
}

/**
 * The store's `resume` level for a worker: its target (the deep hysteresis), or undefined
 * (the store's own rule) when target or pause is off. Invalid levels are left for the
 * store to reject.
 */
export function resumeAtTarget(target: number | false | undefined, pause: number | false | undefined): number | undefined {
  if (target === false || pause === false) return undefined;
  const t = target ?? DEFAULT_LEVELS.target;
  const p = pause ?? DEFAULT_LEVELS.pause;
  return Math.min(t, p);
}
