import { EventEmitter } from 'node:events';
import os from 'node:os';
import { contactAddress } from '../cluster/address.js';
import {
  type AcquireReplicasParams,
  type CancelTaskParams,
  type ComputeTaskParams,
  type DataAddress,
  type ForgetModuleParams,
  Methods,
  type RegisterWorkerParams,
  type RegisterWorkerResult,
  type ReleaseKeysParams,
  type ShipModuleParams,
  type TaskErrorInfo,
  type WhoHasResult,
  type WorkerRemovedParams,
  substitute,
} from '../cluster/protocol.js';
import { sizeof } from '../codec/index.js';
import type { Channel, ChannelOptions } from '../control/channel.js';
import { connectWithRetry } from '../control/connect.js';
import { AddressError } from '../control/errors.js';
import { ChecksumError, InvalidArgumentError, KeyNotFoundError, SpillwayError, TierReadError, errorMessage } from '../errors.js';
import { FolderOwner } from '../folders/owner.js';
import { reclaimStaleFolders, type ReclaimReport } from '../folders/reclaim.js';
import { type Logger, defaultLogger } from '../log.js';
import { SpillStore } from '../store/spill-store.js';
import type { Lease } from '../store/lease.js';
import { DataClient } from '../transfer/client.js';
import { ProtocolError, RemoteError } from '../transfer/errors.js';
import { checkTlsConfig, clientTls, serverTls } from '../transfer/tls.js';
import { checkExposure } from '../cluster/security.js';
import { DataServer } from '../transfer/server.js';
import { builtinFunction } from './builtins.js';
import { isShuffleFunction } from '../shuffle/protocol.js';
import { ShuffleService } from '../shuffle/worker-service.js';
import { FollowerHold } from './follower-hold.js';
import { ModuleCache } from './module-cache.js';
import { type ExecutionResult, Executor } from './executor.js';
import { keepUnknownTypesEncoded } from '../codec/types.js';
import { Fetcher } from './fetcher.js';
import { FullDiskWatch } from './full-disk.js';
import { formatBytes } from '../units.js';
import { Heartbeat } from './heartbeat.js';
import { WorkerMonitoring } from './monitoring.js';
import { resolveMemoryLimit } from './memory-limit.js';
import { makeRoom } from './room.js';
import { type ResolvedWorkerOptions, type WorkerOptions, resolveWorkerOptions, resumeAtTarget } from './options.js';
import { type QueuedTask, TaskQueue } from './queue.js';
import { StoreLog } from './store-log.js';

/** What the scheduler tells a worker; handled from before registration (see start). */
const SCHEDULER_NOTIFICATIONS = [
  Methods.computeTask,
  Methods.cancelTask,
  Methods.releaseKeys,
  Methods.workerRemoved,
  Methods.shipModule,
  Methods.forgetModule,
  Methods.acquireReplicas,
  Methods.retire,
  Methods.retired,
];
/** Longest a thread waits for the dependent of a followed result: a scheduler round trip, with room for a loaded host. */
const FOLLOWER_HOLD_MS = 250;

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
  readonly #options: ResolvedWorkerOptions;
  readonly #fullDisk: FullDiskWatch;
  readonly #folder: FolderOwner;
  /**
   * What starting reclaimed in `localDirectory`: spill folders of Spillway processes that
   * died without removing them (their owner gone), with the bytes they held.
   */
  readonly reclaimed: ReclaimReport;
  readonly #executor: Executor;
  readonly #modules: ModuleCache;
  readonly #fetcher: Fetcher;
  readonly #heartbeat: Heartbeat;
  readonly #log: Logger;
  readonly #storeLog: StoreLog;
  readonly #monitoring: WorkerMonitoring;
  /** The store's errors by code (they lose no data: the store keeps the value). */
  readonly #storeErrors: Record<string, number> = {};
  readonly #shuffle: ShuffleService;
  readonly #queue = new TaskQueue();
  readonly #running = new Map<string, QueuedTask>();
  /** A thread kept free for the dependent of a result just reported (follower-hold.ts). */
  readonly #hold = new FollowerHold(FOLLOWER_HOLD_MS, () => this.#pump());
  readonly #prefetching = new Set<string>();
  /** Bytes of the last output of each task function here: the estimate of its next one. */
  readonly #outputBytes = new Map<string, number>();
  #fetches = 0;
  /** Inputs whose copy here was corrupt or unreadable, dropped and recomputed (or fetched again). */
  corruptInputs = 0;
  #closing: Promise<void> | undefined;
  #retiring: Promise<boolean> | undefined;
  /** Resolves when the scheduler says `retired` (or the worker closes). */
  #retired!: () => void;
  readonly #retiredSignal = new Promise<void>((resolve) => (this.#retired = resolve));
  #channel: Channel;
  #workerId: string;
  /** Stops a reconnection in progress when the worker closes. */
  readonly #stop = new AbortController();

  private constructor(parts: {
    options: ResolvedWorkerOptions;
    folder: FolderOwner;
    reclaimed: ReclaimReport;
    store: SpillStore;
    server: DataServer;
    channel: Channel;
    executor: Executor;
    modules: ModuleCache;
    registration: RegisterWorkerResult;
    name: string;
    address: DataAddress;
    log: Logger;
  }) {
    super();
    const { options, store, server, channel } = parts;
    this.#options = options;
    this.#folder = parts.folder;
    this.reclaimed = parts.reclaimed;
    this.store = store;
    this.server = server;
    this.address = parts.address;
    this.#channel = channel;
    this.#executor = parts.executor;
    this.#modules = parts.modules;
    this.#shuffle = new ShuffleService({
      store,
      executor: parts.executor,
      channel: () => this.#channel,
      token: options.token,
      tls: options.tls === undefined ? undefined : clientTls(options.tls),
      self: parts.address,
    });
    this.#log = parts.log;
    // The pool has replaced the thread; the tasks and the data are unaffected.
    this.#executor.onThreadError = (err) => {
      this.#log.error({ err: errorMessage(err) }, 'a task thread died; the pool replaced it');
      this.emit('thread-error', err);
    };
    this.#workerId = parts.registration.workerId;
    this.name = parts.name;
    this.nthreads = options.nthreads;
    this.#fetcher = new Fetcher({
      client: new DataClient({ token: options.token, tls: options.tls === undefined ? undefined : clientTls(options.tls), connectTimeoutMs: options.connectTimeoutMs }),
      store,
      self: parts.address,
      whoHas: (keys) => this.#channel.request<WhoHasResult>(Methods.whoHas, { keys }, 30_000),
    });
    const fetcher = this.#fetcher;
    this.#heartbeat = new Heartbeat(
      {
        workerId: () => this.#workerId,
        store,
        server,
        directory: parts.folder.directory,
        executing: () => this.#running.size,
        queued: () => this.#queue.size,
        received: () => fetcher.received,
        shuffle: () => this.#shuffle.bytes,
        errors: () => ({ ...this.#storeErrors }),
      },
      options.heartbeatIntervalMs ?? parts.registration.heartbeatIntervalMs,
      (beat) => this.#channel.notify(Methods.heartbeat, beat),
    );
    this.#monitoring = new WorkerMonitoring({
      name: this.name,
      memoryLimit: options.memoryLimit,
      figures: () => this.#heartbeat.figures(),
      healthy: () => !this.closed && !this.#channel.closed,
    });
    store.on('resume', () => this.#pump());
    this.#fullDisk = new FullDiskWatch(store, options.spillFailureTimeoutMs ?? 10_000, (failure) => this.#failForFullDisk(failure));
    // Spill and read failures lose no data (the store keeps the value); they must not crash the worker.
    store.on('error', (err: unknown) => {
      const code = err instanceof SpillwayError ? err.code : 'UNKNOWN';
      this.#storeErrors[code] = (this.#storeErrors[code] ?? 0) + 1;
    });
    // Logged once per episode of errors, with pause and resume.
    this.#storeLog = new StoreLog(store, this.#log, parts.folder.directory, options.memoryLimit);
  }

  /** Opens the store and the DataServer, connects to the scheduler and registers. */
  static async start(options: WorkerOptions): Promise<Worker> {
    const memoryLimit = await resolveMemoryLimit(options?.memoryLimit, { workersOnHost: options?.workersOnHost });
    const opts = resolveWorkerOptions({ ...options, memoryLimit });
    if (opts.tls !== undefined) checkTlsConfig(opts.tls);
    checkExposure('worker\'s data server', opts.host, opts);
    // Task modules load in the task threads, not here: values of their types are held encoded.
    keepUnknownTypesEncoded(true);
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
        directory,
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
      const requests: { handle?: (body: unknown) => Promise<unknown> } = {};
      const onRequest = async (body: unknown): Promise<unknown> => {
        if (requests.handle === undefined) throw new InvalidArgumentError('this worker is not ready for shuffle pieces yet');
        return await requests.handle(body);
      };
      const server = await DataServer.listen(store, { host: opts.host, port: opts.port, token: opts.token, tls: opts.tls === undefined ? undefined : serverTls(opts.tls), onRequest });
      cleanup.unshift(() => server.close());
      const modules = await ModuleCache.create(directory, opts.allowModules);
      const executor = new Executor(opts.nthreads, { nice: opts.threadNice, collectGarbage: opts.collectGarbage ?? true, modules });
      cleanup.unshift(() => executor.close());
      const address = await contactAddress(server.address, opts.contactAddress);
      const name = opts.name ?? `worker-${process.pid}-${server.address.port}`;
      const started: { worker?: Worker } = {};
      const params: RegisterWorkerParams = { name, data: address, memoryLimit: opts.memoryLimit, nthreads: opts.nthreads, pid: process.pid };
      const { channel, registration, replay } = await register(opts, params, (method, message) => {
        if (started.worker !== undefined) started.worker.#dispatch(method, message);
      });
      cleanup.unshift(async () => channel.close());
      const worker = new Worker({ options: opts, folder, reclaimed, store, server, channel, executor, modules, registration, name, address, log });
      log.info({ workerId: worker.workerId, workerName: name, data: address, memoryLimit: opts.memoryLimit, nthreads: opts.nthreads, directory }, 'worker registered');
      requests.handle = (body) => worker.#shuffle.onRequest(body);
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
      replay();
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
    return this.#channel;
  }

  /** The id the scheduler gave at the last registration. */
  get workerId(): string {
    return this.#workerId;
  }

  /** Tasks waiting in the queue (inputs being fetched, or no free thread). */
  get queued(): number {
    return this.#queue.size;
  }

  /** Tasks started and not finished. */
  get executing(): number {
    return this.#running.size;
  }

  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /** Failed fetches from peers that were retried elsewhere. */
  get fetchFailures(): number {
    return this.#fetcher.failures;
  }

  #listen(): void {
    this.#channel.once('close', (err?: Error) => void this.#onDisconnect(err));
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
    if (this.retiring) return this.#retired();
    this.#log.warn({ err: err === undefined ? undefined : errorMessage(err), reconnect: this.#options.reconnect }, 'lost the scheduler');
    if (!this.#options.reconnect) return this.#shutdown(err);
    this.emit('disconnected', err);
    for (const task of [...this.#queue.values()]) {
      this.#queue.delete(task.key);
      this.#dropReplicas(task.inputs);
    }
    const held = this.#heldKeys();
    const params: RegisterWorkerParams = {
      name: this.name,
      data: this.address,
      memoryLimit: this.#options.memoryLimit,
      nthreads: this.nthreads,
      pid: process.pid,
      keys: [...held.memory, ...held.spilled],
    };
    let registered: Awaited<ReturnType<typeof register>>;
    try {
      registered = await register(this.#options, params, (method, message) => this.#dispatch(method, message), this.#stop.signal);
    } catch (reconnectErr) {
      return this.#shutdown(reconnectErr instanceof Error ? reconnectErr : err);
    }
    if (this.closed) {
      registered.channel.close();
      return;
    }
    this.#channel = registered.channel;
    this.#workerId = registered.registration.workerId;
    this.#listen();
    registered.replay();
    this.#log.info({ workerId: this.#workerId, memoryKeys: held.memory.length, spilledKeys: held.spilled.length }, 'registered again with the scheduler');
    this.emit('reconnected', { workerId: this.#workerId, memoryKeys: held.memory.length, spilledKeys: held.spilled.length });
    this.#pump();
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

  /** The scheduler's notifications to a worker. */
  #dispatch(method: string, params: unknown): void {
    if (method === Methods.computeTask) this.#onComputeTask(params as ComputeTaskParams);
    else if (method === Methods.cancelTask) this.#onCancelTask(params as CancelTaskParams);
    else if (method === Methods.workerRemoved) this.#onWorkerRemoved(params as WorkerRemovedParams);
    else if (method === Methods.shipModule) this.#modules.add(params as ShipModuleParams);
    else if (method === Methods.forgetModule) this.#modules.forget(params as ForgetModuleParams);
    else if (method === Methods.acquireReplicas) void this.#onAcquireReplicas(params as AcquireReplicasParams);
    else if (method === Methods.retire) void this.#retireOnRequest();
    else if (method === Methods.retired) this.#retired();
    else this.#onReleaseKeys(params as ReleaseKeysParams);
  }

  /** True once retire() began: no new task starts here. */
  get retiring(): boolean {
    return this.#retiring !== undefined;
  }

  /**
   * Retires: starts no new task, gives the queued ones back to the scheduler, which has
   * every key only this worker holds copied to other workers (spilled ones streamed from
   * disk as they are), lets the running tasks finish, then closes. Resolves true when the
   * scheduler said it was done, false when `retireTimeoutMs` passed first (the rest is
   * recomputed elsewhere) or the scheduler was lost.
   */
  retire(timeoutMs = this.#options.retireTimeoutMs): Promise<boolean> {
    this.#retiring ??= (async () => {
      if (this.closed) return false;
      const started = performance.now();
      const reschedule = this.#takeQueue();
      const stats = this.store.stats();
      this.#log.info({ memoryKeys: stats.memory.count, spilledKeys: stats.disk.count, rescheduled: reschedule.length, running: this.#running.size, timeoutMs }, 'retiring');
      this.#channel.notify(Methods.workerClosing, { reschedule });
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
      const graceful = await Promise.race([this.#retiredSignal.then(() => !this.#channel.closed), timedOut]);
      clearTimeout(timer);
      const seconds = (performance.now() - started) / 1000;
      if (graceful) this.#log.info({ seconds }, 'retired: every key only this worker held is on another worker');
      else this.#log.warn({ seconds, timeoutMs, running: this.#running.size }, 'retirement not finished; closing anyway (the scheduler recomputes the rest)');
      await this.close();
      return graceful;
    })();
    return this.#retiring;
  }

  async #retireOnRequest(): Promise<void> {
    await this.retire();
    this.emit('retired');
  }

  /** Empties the queue (tasks not started), returning their keys. */
  #takeQueue(): string[] {
    const keys: string[] = [];
    for (const task of [...this.#queue.values()]) {
      this.#queue.delete(task.key);
      this.#dropReplicas(task.inputs);
      keys.push(task.key);
    }
    return keys;
  }

  /** Copies of a retiring worker's keys: fetched from the holders named (encoded bytes, never decoded), kept, and reported. */
  async #onAcquireReplicas(params: AcquireReplicasParams): Promise<void> {
    const deps = params?.keys;
    if (this.closed || typeof deps !== 'object' || deps === null || !Object.values(deps).every(Array.isArray)) return;
    const keys = Object.keys(deps);
    let missing: Set<string>;
    try {
      missing = new Set((await this.#fetcher.ensure(keys, deps)).keys());
    } catch {
      missing = new Set(keys);
    }
    if (this.closed) return;
    const got = keys.filter((key) => !missing.has(key) && this.store.has(key));
    // The scheduler knows of these copies now: they are no longer this worker's to drop.
    for (const key of got) this.#fetcher.replicas.delete(key);
    this.#log.debug({ keys: got.length, missing: keys.length - got.length }, "copies of a retiring worker's keys acquired");
    this.#channel.notify(Methods.addKeys, { workerId: this.workerId, keys: got, missing: keys.filter((key) => !got.includes(key)) });
  }

  #onComputeTask(params: ComputeTaskParams): void {
    if (this.closed) return;
    if (this.retiring) {
      // Sent before the scheduler heard this worker is leaving: give it back.
      if (typeof params?.key === 'string') this.#channel.notify(Methods.workerClosing, { reschedule: [params.key] });
      return;
    }
    if (
      typeof params?.key !== 'string' ||
      typeof params.spec?.fn?.module !== 'string' ||
      typeof params.spec.fn.name !== 'string' ||
      (params.spec.args !== undefined && !Array.isArray(params.spec.args)) ||
      (params.deps !== undefined && (typeof params.deps !== 'object' || params.deps === null || !Object.values(params.deps).every(Array.isArray)))
    ) {
      const key = typeof params?.key === 'string' ? params.key : '';
      this.#erred(key, toErrorInfo(new InvalidArgumentError('compute-task needs a key, spec.fn { module, name }, spec.args an array and deps { key: addresses[] }')));
      return;
    }
    if (this.#running.has(params.key)) return; // already running: its result is on its way
    this.#queue.add({ ...params, deps: params.deps ?? {}, priority: Number(params.priority) || 0 });
    this.#pump();
  }

  #onReleaseKeys(params: ReleaseKeysParams): void {
    // A running task keeps the version its lease pinned; the store frees it when the lease ends.
    const keys: unknown = params?.keys;
    if (!Array.isArray(keys)) return; // a string would release its characters
    for (const key of keys) {
      if (typeof key !== 'string') continue;
      this.store.delete(key);
      this.#fetcher.replicas.delete(key);
    }
  }

  #onWorkerRemoved(params: WorkerRemovedParams): void {
    const data = params?.data;
    if (typeof data?.host === 'string' && typeof data.port === 'number') this.#fetcher.holderRemoved(data);
  }

  #onCancelTask(params: CancelTaskParams): void {
    const task = this.#queue.get(params?.key);
    if (task === undefined) return;
    this.#queue.delete(task.key);
    this.#dropReplicas(task.inputs);
  }

  /** Starts what can start: tasks (up to nthreads), reads of spilled inputs ahead, fetches of remote inputs. */
  #pump(): void {
    if (this.closed || this.store.paused) return; // 'resume' pumps again
    while (this.#running.size < this.nthreads) {
      if (this.#hold.holding(this.#queue)) break;
      const [next] = this.#queue.ready(this.store, 1);
      if (next === undefined) break;
      this.#queue.delete(next.key);
      void this.#run(next);
    }
    this.#prefetch();
    while (this.#fetches < this.#options.fetchConcurrency) {
      const [task] = this.#queue.needingFetch(this.store, (key) => this.#running.has(key));
      if (task === undefined) break;
      void this.#fetchFor(task);
    }
  }

  /** Reads back the spilled inputs of the next ready tasks while the threads are busy (one read per key, shared with acquire). */
  #prefetch(): void {
    // Over target (RSS too: reading ahead into a worker whose RSS is high adds to every
    // task's peak) there is no room for values not needed yet.
    if (this.#options.prefetch === 0 || this.store.isProcessAboveTarget()) return;
    for (const task of this.#queue.ready(this.store, this.#options.prefetch)) {
      // Once per task: a read-ahead can push another value out (memory near target), and
      // reading that one back would push this one out again, forever.
      if (task.prefetched === true) continue;
      task.prefetched = true;
      for (const key of task.inputs) {
        if (this.store.where(key) === 'memory' || this.#prefetching.has(key)) continue;
        this.#prefetching.add(key);
        this.store
          .get(key)
          .catch(() => undefined) // the task's own acquire reports a real failure
          .finally(() => {
            this.#prefetching.delete(key);
            // Next turn, not next microtask: a value found through its weak reference
            // resolves at once, and a microtask loop would starve sockets and timers.
            setImmediate(() => this.#pump());
          });
      }
    }
  }

  async #fetchFor(task: QueuedTask): Promise<void> {
    task.fetching = true;
    this.#fetches++;
    const started = performance.now();
    let missing: Map<string, DataAddress[]>;
    try {
      // Inputs that a task here will produce are waited for, not fetched.
      const remote = task.inputs.filter((key) => !this.#queue.has(key) && !this.#running.has(key));
      missing = await this.#fetcher.ensure(remote, task.deps);
    } catch (err) {
      if (this.closed) return;
      missing = new Map();
      if (this.#queue.get(task.key) === task) {
        this.#queue.delete(task.key);
        this.#erred(task.key, toErrorInfo(err));
      }
    } finally {
      this.#fetches--;
      task.fetching = false;
      task.fetchSeconds += (performance.now() - started) / 1000;
    }
    if (this.#queue.get(task.key) !== task) {
      this.#dropReplicas(task.inputs); // cancelled while fetching
    } else if (missing.size > 0) {
      // Dropped: the scheduler corrects its records and sends the task again.
      this.#queue.delete(task.key);
      for (const [key, holders] of missing) {
        this.channel.notify(Methods.missingData, { workerId: this.workerId, task: task.key, key, holders });
      }
      this.#dropReplicas(task.inputs);
    }
    this.#pump();
  }

  async #run(task: QueuedTask): Promise<void> {
    this.#running.set(task.key, task);
    this.emit('task-started', task.key);
    const started = performance.now();
    let lease: Lease;
    try {
      // Pinned for the whole task: the inputs cannot be evicted under it.
      lease = await this.store.acquire(task.inputs);
    } catch (err) {
      this.#running.delete(task.key);
      const corrupt = unreadableKey(err, task.inputs);
      if (err instanceof KeyNotFoundError && !this.closed && this.retiring) {
        this.#channel.notify(Methods.workerClosing, { reschedule: [task.key] });
      } else if (err instanceof KeyNotFoundError && !this.closed) {
        this.#queue.add(task); // an input was released meanwhile: fetch it again
      } else if (corrupt !== undefined && !this.closed) {
        this.#dropCorrupt(task, corrupt, err as Error);
      } else if (!this.closed) {
        this.#erred(task.key, toErrorInfo(err));
        this.#dropReplicas(task.inputs);
      }
      this.#pump();
      return;
    }
    // From here a death of this process counts against the task (allowedFailures).
    this.channel.notify(Methods.taskStarted, { workerId: this.workerId, key: task.key });
    try {
      const args = substitute(task.spec.args ?? [], (key) => lease.get(key));
      const fetchSeconds = task.fetchSeconds + (performance.now() - started) / 1000;
      const builtin = builtinFunction(task.spec.fn);
      const shuffle = isShuffleFunction(task.spec.fn);
      const fnKey = `${task.spec.fn.module}#${task.spec.fn.name}`;
      if (builtin === undefined && !shuffle) {
        // The thread gets a copy of the inputs, then the output comes back: room for both first.
        const inputBytes = task.inputs.reduce((sum, key) => sum + sizeof(lease.get(key)), 0);
        await makeRoom(this.store, inputBytes + (this.#outputBytes.get(fnKey) ?? inputBytes));
        if (this.closed) return;
      }
      const result = shuffle
        ? await this.#shuffle.run({ key: task.key, name: task.spec.fn.name, args })
        : builtin === undefined
          ? await this.#executor.run(task.spec.fn, args)
          : runInline(builtin, args);
      if (this.closed) return;
      if (!result.ok) {
        this.#erred(task.key, result.error);
        return;
      }
      this.#monitoring.observeTask(this.#modules.named(task.spec.fn), result.computeSeconds);
      const size = sizeof(result.value);
      this.#outputBytes.set(fnKey, size);
      this.store.set(task.key, result.value, { size });
      // Computed here and reported: no longer a copy the scheduler does not know of.
      this.#fetcher.replicas.delete(task.key);
      const finished = {
        workerId: this.workerId,
        key: task.key,
        size,
        where: this.store.where(task.key) ?? 'memory',
        computeSeconds: result.computeSeconds,
        fetchSeconds,
      };
      this.channel.notify(Methods.taskFinished, finished);
      this.emit('task-finished', finished);
      if (task.followed === true) this.#hold.start(task.key, size);
    } catch (err) {
      if (!this.closed) this.#erred(task.key, toErrorInfo(err));
    } finally {
      lease.release();
      this.#running.delete(task.key);
      this.#dropReplicas(task.inputs);
      this.#pump();
    }
  }

  /**
   * An input's copy here is corrupt or unreadable: it is dropped and the scheduler told, as for
   * data a peer could not deliver; it drops this worker as a holder, recomputes the key from
   * its task if nobody else has it (lineage), and sends the task again.
   */
  #dropCorrupt(task: QueuedTask, key: string, err: Error): void {
    this.store.delete(key);
    this.#fetcher.replicas.delete(key);
    this.corruptInputs++;
    this.emit('input-corrupt', { key, task: task.key, error: err });
    this.channel.notify(Methods.missingData, { workerId: this.workerId, task: task.key, key, holders: [this.server.address], corrupt: true });
    this.#dropReplicas(task.inputs);
  }

  /** The store is paused for good (full disk, memory over its limit): the tasks waiting here fail, saying why. */
  #failForFullDisk(failure: Error): void {
    const stats = this.store.stats();
    const held = formatBytes(stats.memory.bytes + stats.pinned.bytes);
    const memory = `${held} held, process RSS ${formatBytes(stats.process.rss)}, limit ${formatBytes(this.store.memoryLimit)}`;
    for (const task of [...this.#queue.values()]) {
      this.#queue.delete(task.key);
      this.#erred(task.key, {
        name: 'DiskFullError',
        message: `worker ${JSON.stringify(this.name)} cannot run ${JSON.stringify(task.key)}: its memory is full (${memory}) and spilling to ${this.#folder.directory} fails: ${failure.message}`,
        code: 'SPW_ERR_DISK_FULL',
      });
      this.#dropReplicas(task.inputs);
    }
  }

  #erred(key: string, error: TaskErrorInfo): void {
    const params = { workerId: this.workerId, key, error };
    this.#log.debug({ key, error: `${error.name}: ${error.message}`, code: error.code }, 'task erred');
    this.channel.notify(Methods.taskErred, params);
    this.emit('task-erred', params);
  }

  /**
   * Deletes fetched copies no queued or running task still reads. The scheduler never
   * learned of them, so it would never release them: keeping them would fill the store.
   */
  #dropReplicas(keys: readonly string[]): void {
    const replicas = this.#fetcher.replicas;
    const candidates = keys.filter((key) => replicas.has(key));
    if (candidates.length === 0) return;
    const needed = new Set<string>();
    for (const task of [...this.#queue.values(), ...this.#running.values()]) for (const key of task.inputs) needed.add(key);
    for (const key of candidates) {
      if (needed.has(key)) continue;
      replicas.delete(key);
      this.store.delete(key);
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
    this.#closing ??= (async () => {
      this.#stop.abort();
      this.#retired();
      this.#heartbeat.stop();
      this.#fullDisk.stop();
      this.#shuffle.close();
      this.#hold.clear();
      this.#storeLog.close();
      this.#channel.close();
      await this.#monitoring.close();
      await this.#executor.close().catch(() => undefined);
      // Each step runs even if one before it failed: the spill folder goes in any case.
      let failure: unknown;
      for (const step of [() => this.server.close(), () => this.store.close()]) await step().catch((err: unknown) => (failure ??= err));
      await this.#folder.release();
      if (failure !== undefined) throw failure;
    })();
    return this.#closing;
  }
}

/** A built-in runs here, on the loop: it is O(1), and a thread would need a copy of its inputs. */
function runInline(fn: (...args: unknown[]) => unknown, args: unknown[]): ExecutionResult {
  const started = performance.now();
  try {
    const value = fn(...args);
    return { ok: true, value, computeSeconds: (performance.now() - started) / 1000 };
  } catch (err) {
    return { ok: false, error: toErrorInfo(err), computeSeconds: (performance.now() - started) / 1000 };
  }
}

/** The input whose stored copy failed its checksum or its read, if that is what `err` is. */
function unreadableKey(err: unknown, inputs: readonly string[]): string | undefined {
  const key = err instanceof ChecksumError || err instanceof TierReadError ? err.key : undefined;
  return key !== undefined && inputs.includes(key) ? key : undefined;
}

function toErrorInfo(err: unknown): TaskErrorInfo {
  if (err instanceof Error) {
    return { name: err.name, message: err.message, stack: err.stack, code: err instanceof SpillwayError ? err.code : undefined };
  }
  return { name: 'Error', message: String(err) };
}

/**
 * Connects to the scheduler (retrying until the connect timeout) and registers. Handlers
 * first: a compute-task (and a cancel-task of it) may follow the registration answer at
 * once. The channel picks a message's handler when it reads it and calls it a microtask
 * later: one read with the registration answer still lands here, and is replayed in order
 * (`replay`) once the worker can take it.
 */
async function register(
  opts: ResolvedWorkerOptions,
  params: RegisterWorkerParams,
  dispatch: (method: string, params: unknown) => void,
  signal?: AbortSignal,
): Promise<{ channel: Channel; registration: RegisterWorkerResult; replay: () => void }> {
  const channelOptions: ChannelOptions = { token: opts.token, tls: opts.tls === undefined ? undefined : clientTls(opts.tls) };
  const channel = await connectWithRetry(opts.scheduler, channelOptions, { timeoutMs: opts.schedulerConnectTimeoutMs, signal });
  const early: { method: string; params: unknown }[] = [];
  let live = false;
  for (const method of SCHEDULER_NOTIFICATIONS) {
    channel.handle(method, (message) => {
      if (!live) early.push({ method, params: message });
      else dispatch(method, message);
    });
  }
  try {
    const registration = await channel.request<RegisterWorkerResult>(Methods.registerWorker, params, 30_000);
    checkRegistration(registration, opts.heartbeatIntervalMs);
    const replay = (): void => {
      live = true;
      for (const { method, params: message } of early.splice(0)) dispatch(method, message);
    };
    return { channel, registration, replay };
  } catch (err) {
    channel.close();
    // The scheduler refused the data address: a configuration error, named as one here.
    if (err instanceof RemoteError && err.remoteCode === 'SPW_ERR_ADDRESS') throw new AddressError(err.message);
    throw err;
  }
}

/** A registration answer the worker can run on: a workerId, and heartbeats at a sane interval (its own, if set). */
function checkRegistration(registration: RegisterWorkerResult, ownIntervalMs: number | undefined): void {
  const interval = ownIntervalMs ?? registration?.heartbeatIntervalMs;
  if (typeof registration?.workerId !== 'string' || typeof interval !== 'number' || !Number.isFinite(interval) || interval < 1) {
    throw new ProtocolError(`the scheduler's registration answer is malformed: ${JSON.stringify(registration)?.slice(0, 200)}`);
  }
}
