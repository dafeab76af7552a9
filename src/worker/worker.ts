import { EventEmitter } from 'node:events';
import os from 'node:os';
import { contactAddress } from '../cluster/address.js';
import { type DataAddress, type RegisterWorkerParams } from '../cluster/protocol.js';
import type { Channel } from '../control/channel.js';
import { InvalidArgumentError, errorMessage } from '../errors.js';
import { FolderOwner } from '../folders/owner.js';
import { reclaimStaleFolders, type ReclaimReport } from '../folders/reclaim.js';
import { type Logger, defaultLogger } from '../log.js';
import { SpillStore } from '../store/spill-store.js';
import { DiskTier } from '../tiers/disk/disk-tier.js';
import { DataClient } from '../transfer/client.js';
import { checkTlsConfig, clientTls, serverTls } from '../transfer/tls.js';
import { checkExposure } from '../cluster/security.js';
import { DataServer } from '../transfer/server.js';
import { ShuffleService } from '../shuffle/worker-service.js';
import { ModuleCache } from './module-cache.js';
import { Executor } from './executor.js';
import { keepTypedValuesEncoded } from '../codec/types.js';
import { Fetcher } from './fetcher.js';
import { FullDiskWatch } from './full-disk.js';
import { formatBytes } from '../units.js';
import { Heartbeat } from './heartbeat.js';
import { WorkerLifecycle } from './lifecycle.js';
import { WorkerMonitoring } from './monitoring.js';
import { resolveMemoryLimit } from './memory-limit.js';
import { type ResolvedWorkerOptions, type WorkerOptions, resolveWorkerOptions, resumeAtTarget } from './options.js';
import { Retirement } from './retirement.js';
import { Room } from './room.js';
import { type Registered, SchedulerLink, register } from './scheduler-link.js';
import { SchedulerMessages } from './scheduler-messages.js';
import { StoreErrorCounts } from './store-errors.js';
import { StoreLog } from './store-log.js';
import { TaskPump } from './task-pump.js';
import { TaskReports } from './task-reports.js';
import { WorkerTasks } from './tasks.js';

/**
 * The shared memory large task inputs cross to their threads in (worker/staging.ts), as a
 * share of the memory limit: held for the worker's life once used, outside the store.
 */
const STAGING_SHARE = 16;

/**
 * A worker: a SpillStore, a DataServer serving it to peers, a pool of threads running
 * tasks, and a control channel to the scheduler. It runs what the scheduler sends
 * (compute-task), fetches inputs from peers, and reports results; see docs/cluster.md#worker.
 *
 * Events: 'task-started' (key), 'task-finished' (TaskFinishedParams), 'task-erred'
 * (TaskErredParams), 'disconnected' (err?: the scheduler connection was lost; reconnecting),
 * 'reconnected' ({ workerId, memoryKeys, spilledKeys }), 'input-corrupt' ({ key, task, error }:
 * an input's copy here failed its checksum or read, was dropped and reported), 'close' (err?: the scheduler could
 * not be reached again within schedulerConnectTimeoutMs, or reconnecting is off).
 */
export class Worker extends EventEmitter {
  readonly store: SpillStore;
  readonly server: DataServer;
  /** The data address peers are told (the contact address, else where the server listens). */
  readonly address: DataAddress;
  readonly name: string;
  readonly nthreads: number;
  /**
   * What starting reclaimed in `localDirectory`: spill folders of Spillway processes that
   * died without removing them (their owner gone), with the bytes they held.
   */
  readonly reclaimed: ReclaimReport;
  readonly #options: ResolvedWorkerOptions;
  readonly #folder: FolderOwner;
  readonly #log: Logger;
  readonly #link: SchedulerLink;
  readonly #life = new WorkerLifecycle();
  readonly #executor: Executor;
  readonly #fetcher: Fetcher;
  readonly #tasks: WorkerTasks;
  readonly #reports: TaskReports;
  readonly #pump: TaskPump;
  readonly #retirement: Retirement;
  readonly #messages: SchedulerMessages;
  readonly #shuffle: ShuffleService;
  readonly #heartbeat: Heartbeat;
  readonly #monitoring: WorkerMonitoring;
  readonly #fullDisk: FullDiskWatch;
  readonly #storeLog: StoreLog;
  /** Stops a reconnection in progress when the worker closes. */
  readonly #stop = new AbortController();

  private constructor(parts: {
    options: ResolvedWorkerOptions;
    folder: FolderOwner;
    reclaimed: ReclaimReport;
    store: SpillStore;
    server: DataServer;
    registered: Registered;
    executor: Executor;
    modules: ModuleCache;
    name: string;
    address: DataAddress;
    log: Logger;
  }) {
    super();
    const { options, store, server, executor, modules, address, log } = parts;
    this.#options = options;
    this.#folder = parts.folder;
    this.reclaimed = parts.reclaimed;
    this.store = store;
    this.server = server;
    this.address = address;
    this.name = parts.name;
    this.nthreads = options.nthreads;
    this.#log = log;
    this.#executor = executor;
    const link = (this.#link = new SchedulerLink(parts.registered));
    const life = this.#life;
    const tls = (): ReturnType<typeof clientTls> | undefined => (options.tls === undefined ? undefined : clientTls(options.tls));
    // One line of admission for every task's thread work: shuffle splits and assemblies too.
    const room = new Room(store);
    this.#shuffle = new ShuffleService({ store, executor, channel: () => link.channel, token: options.token, tls: tls(), self: address, room });
    // The pool has replaced the thread; the tasks and the data are unaffected.
    executor.onThreadError = (err) => {
      log.error({ err: errorMessage(err) }, 'a task thread died; the pool replaced it');
      this.emit('thread-error', err);
    };
    const client = new DataClient({ token: options.token, tls: tls(), connectTimeoutMs: options.connectTimeoutMs });
    const fetcher = (this.#fetcher = new Fetcher({ client, store, self: address, scheduler: link }));
    const tasks = (this.#tasks = new WorkerTasks(store, fetcher.replicas));
    const reports = (this.#reports = new TaskReports(link, log, this));
    const storeErrors = new StoreErrorCounts(store);
    const directory = parts.folder.directory;
    const heartbeatParts = { link, store, server, directory, tasks, fetcher, shuffle: this.#shuffle, storeErrors, supervisorRestarts: options.supervisorRestarts };
    this.#heartbeat = new Heartbeat(heartbeatParts, options.heartbeatIntervalMs ?? parts.registered.registration.heartbeatIntervalMs);
    this.#monitoring = new WorkerMonitoring({ name: this.name, memoryLimit: options.memoryLimit, heartbeat: this.#heartbeat, life, link });
    const runnerParts = { store, server, tasks, reports, life, fetcher, executor, shuffle: this.#shuffle, modules, monitoring: this.#monitoring, events: this, room };
    const pump = (this.#pump = new TaskPump(runnerParts, options.nthreads, options));
    this.#retirement = new Retirement({ store, tasks, fetcher, link, reports, life, log, worker: this });
    this.#messages = new SchedulerMessages({ store, tasks, pump, fetcher, modules, reports, retirement: this.#retirement, life, shuffle: this.#shuffle, retireTimeoutMs: options.retireTimeoutMs });
    store.on('resume', () => pump.pump());
    this.#fullDisk = new FullDiskWatch(store, options.spillFailureTimeoutMs ?? 10_000, (failure) => this.#failForFullDisk(failure));
    // Logged once per episode of errors, with pause and resume.
    this.#storeLog = new StoreLog(store, log, directory, options.memoryLimit);
  }

/** Opens the store and the DataServer, connects to the scheduler and registers. */
  static async start(options: WorkerOptions): Promise<Worker> {
    const memoryLimit = await resolveMemoryLimit(options?.memoryLimit, { workersOnHost: options?.workersOnHost });
    const opts = resolveWorkerOptions({ ...options, memoryLimit });
    if (opts.tls !== undefined) checkTlsConfig(opts.tls);
    checkExposure('worker\'s data server', opts.host, opts);
    // Task modules load in the threads, not here: their types' values (and Arrow's) stay encoded.
    keepTypedValuesEncoded(true);
    const log = opts.logger ?? defaultLogger('spillway-worker');
    const parent = opts.localDirectory ?? os.tmpdir();
    // Folders of workers (and stores, clusters) that died without removing them go first.
    const reclaimed = await reclaimStaleFolders(parent);
    const folder = await FolderOwner.create(parent, 'spillway-worker-');
    const directory = folder.directory;
    const cleanup: (() => Promise<void>)[] = [() => folder.release()];
    try {
      const store = await SpillStore.open({
        memoryLimit: opts.memoryLimit,
        tiers: [new DiskTier({ directory, directWrites: opts.directWrites })],
        target: opts.target,
        spill: opts.spill,
        pause: opts.pause,
        // A worker's producers (tasks, fetches) are not a tight loop waiting on the disk, and
        // its RSS peaks come from the pause level: it keeps the deep hysteresis, resuming at target.
        resume: resumeAtTarget(opts.target, opts.pause),
        monitorIntervalMs: opts.monitorIntervalMs,
        maxSpill: opts.maxSpill,
        spillConcurrency: opts.spillConcurrency,
        collectGarbage: opts.collectGarbage ?? true,
      });
      cleanup.unshift(() => store.close());
      // Peers push shuffle pieces as generic requests, taken once the worker exists.
      const requests: { handle?: (body: unknown, payload?: readonly Uint8Array[]) => Promise<unknown> } = {};
      const onRequest = async (body: unknown, payload?: readonly Uint8Array[]): Promise<unknown> => {
        if (requests.handle === undefined) throw new InvalidArgumentError('this worker is not ready for shuffle pieces yet');
        return await requests.handle(body, payload);
      };
      const server = await DataServer.listen(store, { host: opts.host, port: opts.port, token: opts.token, tls: opts.tls === undefined ? undefined : serverTls(opts.tls), onRequest });
      cleanup.unshift(() => server.close());
      const modules = await ModuleCache.create(directory, opts.allowModules);
      // Staging for large inputs (worker/staging.ts): STAGING_SHARE of the memory limit.
      const stagingBytes = Math.floor(memoryLimit / STAGING_SHARE);
      const executor = new Executor(opts.nthreads, { nice: opts.threadNice, collectGarbage: opts.collectGarbage ?? true, modules, stagingBytes });
      cleanup.unshift(() => executor.close());
      const address = await contactAddress(server.address, opts.contactAddress);
      const name = opts.name ?? `worker-${process.pid}-${server.address.port}`;
      const started: { worker?: Worker } = {};
      const params: RegisterWorkerParams = { name, data: address, memoryLimit: opts.memoryLimit, nthreads: opts.nthreads, pid: process.pid };
      const registered = await register(opts, params, (method, message) => {
        if (started.worker !== undefined) started.worker.#messages.dispatch(method, message);
      });
      cleanup.unshift(async () => registered.channel.close());
      const worker = new Worker({ options: opts, folder, reclaimed, store, server, registered, executor, modules, name, address, log });
      log.info({ workerId: worker.workerId, workerName: name, data: address, memoryLimit: opts.memoryLimit, nthreads: opts.nthreads, directory, directWrites: opts.directWrites }, 'worker registered');
      requests.handle = (body, payload) => worker.#shuffle.onRequest(body, payload);
      if (opts.httpPort !== undefined) {
        try {
          await worker.#monitoring.listen(opts.httpHost ?? opts.host, opts.httpPort, opts.httpToken);
        } catch (err) {
          worker.#heartbeat.stop();
          throw err;
        }
      }
      worker.#listen();
      started.worker = worker;
      registered.replay();
      return worker;
    } catch (err) {
      for (const step of cleanup) await step().catch(() => undefined);
      throw err;
    }
  }

  /** Where GET /metrics and GET /health are served, when `httpPort` was given. */
  get httpAddress(): { host: string; port: number } | undefined {
    return this.#monitoring.httpAddress;
  }

  /**
   * The control channel to the scheduler (a new one after each reconnection).
   * @internal
   */
  get channel(): Channel {
    return this.#link.channel;
  }

  /** The id the scheduler gave at the last registration. */
  get workerId(): string {
    return this.#link.workerId;
  }

  /** Tasks waiting in the queue (inputs being fetched, or no free thread). */
  get queued(): number {
    return this.#tasks.queue.size;
  }

  /** Tasks started and not finished. */
  get executing(): number {
    return this.#tasks.running.size;
  }

  get closed(): boolean {
    return this.#life.closed;
  }

  /** Failed fetches from peers that were retried elsewhere. */
  get fetchFailures(): number {
    return this.#fetcher.failures;
  }

  /** Inputs whose copy here was corrupt or unreadable, dropped and recomputed (or fetched again). */
  get corruptInputs(): number {
    return this.#pump.runner.corruptInputs;
  }

  /** True once retire() began: no new task starts here. */
  get retiring(): boolean {
    return this.#life.isRetiring;
  }

  /**
   * Retires: starts no new task, gives the queued ones back to the scheduler, which has
   * every key only this worker holds copied to other workers (spilled ones streamed from
   * disk as they are), lets the running tasks finish, then closes. Resolves true when the
   * scheduler said it was done, false when `retireTimeoutMs` passed first (the rest is
   * recomputed elsewhere) or the scheduler was lost.
   */
  retire(timeoutMs = this.#options.retireTimeoutMs): Promise<boolean> {
    return this.#retirement.retire(timeoutMs);
  }

  #listen(): void {
    this.#link.channel.once('close', (err?: Error) => void this.#onDisconnect(err));
    this.#heartbeat.beat();
  }

  /**
   * The scheduler connection is gone (the scheduler restarted, stalled and dropped this
   * worker, or the network failed). The queued tasks were the old registration's: the
   * scheduler places them again. Tasks running go on; what they produce stays in the store
   * and is reported with the rest at the next registration.
   */
  async #onDisconnect(err?: Error): Promise<void> {
    if (this.closed) return;
    // A retirement cannot finish without the scheduler: close instead of registering again.
    if (this.retiring) return this.#retirement.retired();
    this.#log.warn({ err: err === undefined ? undefined : errorMessage(err), reconnect: this.#options.reconnect }, 'lost the scheduler');
    if (!this.#options.reconnect) return this.#shutdown(err);
    this.emit('disconnected', err);
    this.#tasks.takeQueued();
    // The scheduler removed this worker and restarts the shuffles it took part in (or it is a new one): what is held of them is stale.
    this.#shuffle.receiver.reset();
    const held = this.#heldKeys();
    const params: RegisterWorkerParams = {
      name: this.name,
      data: this.address,
      memoryLimit: this.#options.memoryLimit,
      nthreads: this.nthreads,
      pid: process.pid,
      keys: [...held.memory, ...held.spilled],
    };
    let registered: Registered;
    try {
      registered = await register(this.#options, params, (method, message) => this.#messages.dispatch(method, message), this.#stop.signal);
    } catch (reconnectErr) {
      return this.#shutdown(reconnectErr instanceof Error ? reconnectErr : err);
    }
    if (this.closed) {
      registered.channel.close();
      return;
    }
    this.#link.replace(registered);
    this.#listen();
    registered.replay();
    const workerId = this.#link.workerId;
    this.#log.info({ workerId, memoryKeys: held.memory.length, spilledKeys: held.spilled.length }, 'registered again with the scheduler');
    this.emit('reconnected', { workerId, memoryKeys: held.memory.length, spilledKeys: held.spilled.length });
    this.#pump.pump();
  }

  /** The keys this worker holds as results (fetched copies the scheduler never knew of are left out), by where they are. */
  #heldKeys(): { memory: string[]; spilled: string[] } {
    const memory: string[] = [];
    const spilled: string[] = [];
    for (const key of this.store.keys()) {
      if (this.#fetcher.replicas.has(key)) continue;
      (this.store.where(key) === 'memory' ? memory : spilled).push(key);
    }
    return { memory, spilled };
  }

  /** The store is paused for good (full disk, memory over its limit): the tasks waiting here fail, saying why. */
  #failForFullDisk(failure: Error): void {
    const stats = this.store.stats();
    const held = formatBytes(stats.memory.bytes + stats.pinned.bytes);
    const memory = `${held} held, process RSS ${formatBytes(stats.process.rss)}, limit ${formatBytes(this.store.memoryLimit)}`;
    for (const task of [...this.#tasks.queue.values()]) {
      this.#tasks.queue.delete(task.key);
      this.#reports.erred(task.key, {
        name: 'DiskFullError',
        message: `worker ${JSON.stringify(this.name)} cannot run ${JSON.stringify(task.key)}: its memory is full (${memory}) and spilling to ${this.#folder.directory} fails: ${failure.message}`,
        code: 'SPW_ERR_DISK_FULL',
      });
      this.#tasks.dropReplicas(task.inputs);
    }
  }

  async #shutdown(err?: Error): Promise<void> {
    if (!this.closed) this.#log.error({ err: err === undefined ? undefined : errorMessage(err) }, 'closing: the scheduler cannot be reached');
    // Nobody awaits this (the channel's 'close' handler): a failed close is reported, not an unhandled rejection.
    const failure = await this.close().then(
      () => undefined,
      (closeErr: unknown) => closeErr,
    );
    this.emit('close', err ?? (failure instanceof Error ? failure : undefined));
  }

  /** Stops everything: tasks in flight are abandoned, the spill folder is removed. */
  close(): Promise<void> {
    this.#life.closing ??= (async () => {
      this.#stop.abort();
      this.#retirement.retired();
      this.#heartbeat.stop();
      this.#fullDisk.stop();
      this.#shuffle.close();
      this.#pump.hold.clear();
      this.#storeLog.close();
      this.#link.channel.close();
      await this.#monitoring.close();
      await this.#executor.close().catch(() => undefined);
      // Each step runs even if one before it failed: the spill folder goes in any case.
      let failure: unknown;
      for (const step of [() => this.server.close(), () => this.store.close()]) await step().catch((err: unknown) => (failure ??= err));
      await this.#folder.release();
      if (failure !== undefined) throw failure;
    })();
    return this.#life.closing;
  }
}
