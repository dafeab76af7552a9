import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { ClusterState, DataAddress } from '../cluster/protocol.js';
import { InvalidArgumentError } from '../errors.js';
import { generateThrowawayCertificates, writeTlsFiles } from '../cluster/certificates.js';
import { type TlsConfig, checkTlsConfig } from '../transfer/tls.js';
import { FolderOwner } from '../folders/owner.js';
import { reclaimStaleFolders, type ReclaimReport } from '../folders/reclaim.js';
import { type LogLevel, checkLogLevel, createLogger, environmentLogLevel } from '../log.js';
import { formatBytes, parseBytes } from '../units.js';
import { CliProcess, ClusterProcessError } from './processes.js';
import { Supervisor } from './supervisor.js';
import { fetchClusterState } from './state.js';

export interface LocalClusterOptions {
  /** Worker processes. Default 2. */
  workers?: number;
  /** Memory limit of each worker: bytes or '256 MiB'. Default '256 MiB'. */
  memoryLimit?: number | string;
  /** Task threads per worker. Default: this machine's cores shared among the workers (at least 1). */
  nthreads?: number;
  /** Shared secret. Default: a fresh random token; `false` runs without one. */
  token?: string | false;
  /**
   * TLS between every member: `true` generates a throwaway CA and certificate (mutual TLS),
   * or give your own material. Default: none. Connect with `{ tls: cluster.tls }`.
   */
  tls?: boolean | TlsConfig;
  /** Parent of the cluster's scratch folder. Default: the OS temp directory. */
  localDirectory?: string;
  /** Port of the scheduler's HTTP endpoint (/api/state, /metrics). Default: any free port. */
  httpPort?: number;
  /** Heartbeat interval the scheduler asks of workers (ms). */
  heartbeatIntervalMs?: number;
  /** The scheduler's `allowedFailures`: worker deaths a running task survives. Default 3. */
  allowedFailures?: number;
  /** Where the processes' stderr goes: kept (and shown when one fails), or this process's stderr. Default 'pipe'. */
  stderr?: 'pipe' | 'inherit';
  /** Time for the processes to start and register. Default 60 s. */
  startTimeoutMs?: number;
  /** Time each process gets to exit after a signal before SIGKILL. Default 5 s. */
  closeTimeoutMs?: number;
  /**
   * Start the workers with the C library's allocator tuned for large buffers, V8's young
   * generation capped and its helper threads sized to the workers' share of the cores (the
   * supervisor's `tuneMalloc`, docs/configuration.md); variables already set in this
   * process's environment win either way. Default true.
   */
  tuneMalloc?: boolean;
  /**
   * How long a worker that lost the scheduler keeps trying to reach it again before it exits
   * (ms). Default 5 s: a LocalCluster's scheduler is not restarted, but one that stalled and
   * dropped its workers takes them back.
   */
  connectTimeoutMs?: number;
  /** The processes' log level (pino on their stderr). Default: $SPILLWAY_LOG_LEVEL, else warn. */
  logLevel?: LogLevel;
  /** How long a worker retiring (SIGTERM, retireWorkers) may take to hand its data over (ms). Default 30 s. */
  retireTimeoutMs?: number;
  /** Start a worker again when it exits unexpectedly (docs/cluster.md#supervisor). Default true. */
  restart?: boolean;
  /** Kill (and restart) a worker whose RSS passes its footprint at registration plus this fraction of twice its memory limit (docs/cluster.md#supervisor); 0 = never. Default 0.95. */
  terminate?: number;
}

export interface LocalWorkerInfo {
  pid: number;
  workerId: string;
  data: DataAddress;
}

const live = new Set<CliProcess>();
const liveSupervisors = new Set<Supervisor>();
const liveDirectories = new Set<string>();
let exitHookInstalled = false;

/**
 * SIGKILLs every process of every LocalCluster of this process (for signal handlers that
 * must exit now) and returns their scratch folders, for the caller to remove.
 */
export function killLocalClusters(): string[] {
  for (const p of live) if (p.running) p.child.kill('SIGKILL');
  for (const s of liveSupervisors) void s.stop(0, 'SIGKILL');
  return [...liveDirectories];
}

/**
 * What a signal handler does before exiting: SIGKILLs every process of every LocalCluster
 * of this process, waits (up to `ms`) until they are gone, so none writes into a folder
 * being removed, and returns the scratch folders for the caller to remove.
 */
export async function killLocalClustersAndWait(ms = 2_000): Promise<string[]> {
  const running = [...live];
  const folders = killLocalClusters();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(running.map((p) => p.exited)),
    new Promise((resolve) => (timer = setTimeout(resolve, ms))),
  ]);
  clearTimeout(timer);
  return folders;
}

/** Last resort when the parent exits without close(): no process is left behind. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => void killLocalClusters());
}

/**
 * A scheduler and N workers on this machine, each its own process started through the
 * `spillway` CLI, in a scratch folder removed at close().
 */
export class LocalCluster {
  readonly token: string | undefined;
  /** The TLS material of the cluster's members, for `Client.connect(cluster.address, { tls: cluster.tls })`. */
  readonly tls: TlsConfig | undefined;
  readonly memoryLimit: number;
  readonly #scheduler: CliProcess;
  readonly #supervisor: Supervisor;
  readonly #infos: LocalWorkerInfo[];
  readonly #folder: FolderOwner;
  /** What starting reclaimed in the parent folder: folders of Spillway processes that died without removing them. */
  readonly reclaimed: ReclaimReport;
  readonly #address: DataAddress;
  readonly #httpAddress: DataAddress | undefined;
  readonly #closeTimeoutMs: number;
  #closing: Promise<void> | undefined;

  private constructor(parts: {
    token: string | undefined;
    tls: TlsConfig | undefined;
    memoryLimit: number;
    scheduler: CliProcess;
    supervisor: Supervisor;
    infos: LocalWorkerInfo[];
    folder: FolderOwner;
    reclaimed: ReclaimReport;
    address: DataAddress;
    httpAddress: DataAddress | undefined;
    closeTimeoutMs: number;
  }) {
    this.token = parts.token;
    this.tls = parts.tls;
    this.memoryLimit = parts.memoryLimit;
    this.#scheduler = parts.scheduler;
    this.#supervisor = parts.supervisor;
    this.#infos = parts.infos;
    this.#folder = parts.folder;
    this.reclaimed = parts.reclaimed;
    this.#address = parts.address;
    this.#httpAddress = parts.httpAddress;
    this.#closeTimeoutMs = parts.closeTimeoutMs;
  }

  static async start(options: LocalClusterOptions = {}): Promise<LocalCluster> {
    const count = options.workers ?? 2;
    if (!Number.isInteger(count) || count < 1) throw new InvalidArgumentError(`workers must be a positive integer, got ${count}`);
    const memoryLimit = parseBytes(options.memoryLimit ?? '256 MiB', 'memoryLimit');
    if (memoryLimit <= 0) throw new InvalidArgumentError('memoryLimit must be positive');
    if (options.allowedFailures !== undefined && !(Number.isSafeInteger(options.allowedFailures) && options.allowedFailures >= 0)) {
      throw new InvalidArgumentError(`allowedFailures must be a whole number, got ${String(options.allowedFailures)}`);
    }
    const nthreads = options.nthreads ?? Math.max(1, Math.floor(os.availableParallelism() / count));
    if (options.connectTimeoutMs !== undefined && !(Number.isInteger(options.connectTimeoutMs) && options.connectTimeoutMs >= 0)) {
      throw new InvalidArgumentError(`connectTimeoutMs must be a non-negative integer, got ${options.connectTimeoutMs}`);
    }
    const token = options.token === false ? undefined : (options.token ?? randomBytes(24).toString('hex'));
    const timeout = options.startTimeoutMs ?? 60_000;
    const stderr = options.stderr ?? 'pipe';
    const tuneMalloc = options.tuneMalloc ?? true;
    if (typeof tuneMalloc !== 'boolean') throw new InvalidArgumentError(`tuneMalloc must be a boolean, got ${String(tuneMalloc)}`);
    const logLevel = options.logLevel === undefined ? (environmentLogLevel() ?? 'warn') : checkLogLevel(options.logLevel, 'logLevel');
    const tls = options.tls === true ? await generateThrowawayCertificates() : options.tls === false || options.tls === undefined ? undefined : checkTlsConfig(options.tls);
    // The token travels in the environment, never on a command line (visible in `ps`); TLS
    // settings of this process's environment are not the cluster's (undefined unsets them).
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      SPILLWAY_TOKEN: token ?? '',
      SPILLWAY_LOG_LEVEL: logLevel,
      SPILLWAY_TLS_CA_FILE: undefined,
      SPILLWAY_TLS_CERT: undefined,
      SPILLWAY_TLS_KEY: undefined,
    };
    installExitHook();
    const parent = options.localDirectory ?? os.tmpdir();
    // Folders of clusters (and workers, stores) that died without removing them go first.
    const reclaimed = await reclaimStaleFolders(parent);
    const folder = await FolderOwner.create(parent, 'spillway-cluster-');
    const directory = folder.directory;
    liveDirectories.add(directory);
    if (tls !== undefined) {
      const files = await writeTlsFiles(directory, tls).catch(async (err: unknown) => {
        await folder.release();
        liveDirectories.delete(directory);
        throw err;
      });
      Object.assign(env, { SPILLWAY_TLS_CA_FILE: files.caFile, SPILLWAY_TLS_CERT: files.certFile, SPILLWAY_TLS_KEY: files.keyFile });
    }
    const started: CliProcess[] = [];
    const launch = (label: string, args: string[]): CliProcess => {
      const p = new CliProcess(label, args, env, stderr);
      started.push(p);
      live.add(p);
      void p.exited.then(() => live.delete(p));
      return p;
    };
    try {
      const schedulerArgs = ['scheduler', '--host', '127.0.0.1', '--port', '0', '--http-port', String(options.httpPort ?? 0)];
      if (options.heartbeatIntervalMs !== undefined) schedulerArgs.push('--heartbeat-interval', String(options.heartbeatIntervalMs));
      if (options.allowedFailures !== undefined) schedulerArgs.push('--allowed-failures', String(options.allowedFailures));
      const scheduler = launch('scheduler', schedulerArgs);
      const listening = await scheduler.waitForEvent('listening', timeout);
      const address = listening.address as DataAddress;
      const httpAddress = (listening.httpAddress ?? undefined) as DataAddress | undefined;
      const supervisor = await Supervisor.start({
        count,
        args: (i) => [
          '--scheduler', `${address.host}:${address.port}`,
          '--memory-limit', String(memoryLimit),
          '--nthreads', String(nthreads),
          '--local-directory', directory,
          '--name', `local-${i}`,
          '--connect-timeout', String(options.connectTimeoutMs ?? 5_000),
          ...(options.retireTimeoutMs === undefined ? [] : ['--retire-timeout', `${options.retireTimeoutMs}ms`]),
        ],
        env,
        tuneMalloc,
        taskThreads: nthreads,
        memoryLimit,
        terminate: options.terminate,
        restart: options.restart,
        startTimeoutMs: timeout,
        stderr,
        // Kills, crash loops and restarts show on this process's stderr, as the workers' own logs do.
        log: createLogger('spillway-supervisor', logLevel),
      }, (created) => {
        liveSupervisors.add(created);
        void created.done.then(() => liveSupervisors.delete(created));
      });
      const infos = supervisor.workers.map((w) => ({ pid: w.pid, workerId: String(w.ready?.workerId), data: w.ready?.data as DataAddress }));
      return new LocalCluster({ token, tls, memoryLimit, scheduler, supervisor, infos, folder, reclaimed, address, httpAddress, closeTimeoutMs: options.closeTimeoutMs ?? 5_000 });
    } catch (err) {
      await Promise.all(started.map((p) => p.stop(1_000)));
      await folder.release();
      liveDirectories.delete(directory);
      throw err;
    }
  }

  /** The scheduler's control address, `host:port`. */
  get address(): string {
    return `${this.#address.host}:${this.#address.port}`;
  }

  /** The scheduler's HTTP endpoint, `http://host:port`, if it serves one. */
  get httpAddress(): string | undefined {
    return this.#httpAddress === undefined ? undefined : `http://${this.#httpAddress.host}:${this.#httpAddress.port}`;
  }

  /** Process ids of the workers, in start order (a restarted worker keeps its place, with its new pid). */
  get workers(): number[] {
    return this.#supervisor.workers.map((w) => w.pid);
  }

  /** The workers as first started. */
  get workerInfo(): readonly LocalWorkerInfo[] {
    return this.#infos;
  }

  /** The supervisor of the worker processes: restarts, memory kills, waiting for a restarted worker. */
  get supervisor(): Supervisor {
    return this.#supervisor;
  }

  get schedulerPid(): number {
    return this.#scheduler.pid;
  }

  /**
   * The end of the scheduler's stderr (its log lines at the cluster's `logLevel`, the last
   * 8 KiB) when `stderr` is `'pipe'`; each worker's is `supervisor.workers[i].stderrTail`.
   * What to look at when a job misbehaves: a worker removed for missed heartbeats, say.
   */
  get schedulerStderrTail(): string {
    return this.#scheduler.stderrTail;
  }

  /** The scratch folder the workers spill into (removed at close). */
  get directory(): string {
    return this.#folder.directory;
  }

  /** Sends `signal` to worker `i` and waits for that process to exit (the supervisor then restarts it, unless `restart: false`). */
  async killWorker(i: number, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const worker = this.#supervisor.workers[i];
    if (worker === undefined) throw new InvalidArgumentError(`no worker ${i} (there are ${this.#supervisor.workers.length})`);
    if (!worker.running) return;
    const exited = worker.exited;
    this.#supervisor.kill(i, signal);
    await exited;
  }

  /** GET /api/state from the scheduler. */
  state(): Promise<ClusterState> {
    if (this.#httpAddress === undefined) throw new ClusterProcessError('the scheduler serves no HTTP endpoint');
    return fetchClusterState(this.httpAddress as string);
  }

  /** Whether each worker process is still running, in start order. */
  get workersRunning(): boolean[] {
    return this.#supervisor.workers.map((w) => w.running);
  }

  /** Peak and current RSS of each worker process (Linux /proc; undefined elsewhere or once exited). */
  workerMemory(): Promise<Array<{ peakRss: number; rss: number } | undefined>> {
    return Promise.all(this.#supervisor.workers.map((w) => (w.running ? w.memory() : undefined)));
  }

  /**
   * Stops the workers (SIGINT: at once, no retirement, the whole cluster goes), then the
   * scheduler (SIGTERM), each SIGKILLed after a timeout, and removes the scratch folder.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#supervisor.stop(this.#closeTimeoutMs, 'SIGINT');
      await this.#scheduler.stop(this.#closeTimeoutMs);
      await this.#folder.release();
      liveDirectories.delete(this.#folder.directory);
    })();
    return this.#closing;
  }

  toString(): string {
    return `LocalCluster(${this.#supervisor.workers.length} workers × ${formatBytes(this.memoryLimit)} at ${this.address})`;
  }
}
