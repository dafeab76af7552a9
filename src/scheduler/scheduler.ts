import { InvalidArgumentError } from '../errors.js';
import {
  Methods,
  type RegisterWorkerResult,
  type RetireWorkersResult,
  type TaskErrorInfo,
  type TaskFinishedParams,
  type WorkerHeartbeat,
  type WorkerRemovedParams,
} from '../cluster/protocol.js';
import { type Channel, ControlServer } from '../control/index.js';
import { Engine } from './engine.js';
import type { Outbox } from './outbox.js';
import { AlreadyRegisteredError, NotRegisteredError, WrongRoleError } from './errors.js';
import { validateSubmission } from './graph.js';
import type { HttpLimits, HttpServer } from '../http/server.js';
import { functionLabel } from '../metrics/task-duration.js';
import { Dashboard, type DashboardOptions } from '../dashboard/dashboard.js';
import { listenHttp } from './http.js';
import { checkAllowedModules, checkExposure, parseAllowModules } from '../cluster/security.js';
import { ModuleRegistry } from './modules.js';
import { parseBytes } from '../units.js';
import { type TlsConfig, checkTlsConfig, serverTls } from '../transfer/tls.js';
import { ShuffleExtension } from '../shuffle/scheduler-extension.js';
import { ShuffleMethods, isShuffleFunction, shuffleUserFunctions } from '../shuffle/protocol.js';
import { type Logger, resolveLogger } from './log.js';
import { SchedulerMetrics } from './metrics.js';
import { NoWorkersWatch } from './no-workers.js';
import { type SchedulerState, snapshot } from './snapshot.js';
import { TaskStream } from './task-stream.js';
import { type WorkerRecord, checkReachable, checkRegisterWorker, newWorker, object, string, stringArray } from './workers.js';

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

type Session = { role: 'none' } | { role: 'worker'; worker: WorkerRecord } | { role: 'client'; id: string };

const WORKER_METHODS = new Set<string>([
  Methods.heartbeat,
  Methods.taskStarted,
  Methods.taskFinished,
  Methods.taskErred,
  Methods.missingData,
  Methods.workerClosing,
  ShuffleMethods.get,
  ShuffleMethods.transferred,
  Methods.addKeys,
]);
const CLIENT_METHODS = new Set<string>([Methods.submit, Methods.release, Methods.progress, Methods.uploadModule, Methods.retireWorkers]);

/**
 * The scheduler: accepts workers and clients on a ControlServer, keeps the task graph and
 * where every key lives (Engine), and serves /metrics and /api/state over HTTP.
 */
export class Scheduler {
  readonly #server: ControlServer;
  readonly #engine: Engine;
  readonly #shuffles: ShuffleExtension;
  readonly #log: Logger;
  readonly #http: HttpServer | undefined;
  readonly #dashboard: Dashboard | undefined;
  readonly #metrics: SchedulerMetrics;
  /** The last finished tasks: where they ran, how long, how long they waited for data. */
  readonly tasks: TaskStream;
  readonly #channels = new Map<string, Channel>();
  /** Callers of retireWorkers waiting for a worker to leave. */
  readonly #leaving = new Map<string, Array<() => void>>();
  readonly #heartbeatIntervalMs: number;
  readonly #allowModules: readonly string[] | undefined;
  readonly #modules: ModuleRegistry;
  readonly #workerTimeoutMs: number;
  readonly #registerTimeoutMs: number;
  readonly #monitor: NodeJS.Timeout;
  readonly #monitorIntervalMs: number;
  readonly #noWorkers: NoWorkersWatch;
  /** When the heartbeat check last ran, and when this process last came back from a stall of its own. */
  #lastCheck = Date.now();
  #resumedAt = 0;
  #nextId = 1;
  #closed = false;
  #closing: Promise<void> | undefined;

  private constructor(parts: {
    server: ControlServer;
    options: SchedulerOptions;
    log: Logger;
    http: HttpServer | undefined;
    dashboard: Dashboard | undefined;
    engine: Engine;
    metrics: SchedulerMetrics;
    tasks: TaskStream;
    allowModules: readonly string[] | undefined;
    moduleCacheLimit: number;
  }) {
    this.#allowModules = parts.allowModules;
    this.#modules = new ModuleRegistry({
      limitBytes: parts.moduleCacheLimit,
      allowModules: parts.allowModules,
      outbox: {
        ship: (params) => this.#broadcast(Methods.shipModule, params),
        forget: (params) => this.#broadcast(Methods.forgetModule, params),
      },
    });
    const { server, options, log } = parts;
    this.#server = server;
    this.#log = log;
    this.#http = parts.http;
    this.#dashboard = parts.dashboard;
    this.#engine = parts.engine;
    this.#shuffles = new ShuffleExtension(parts.engine);
    this.#metrics = parts.metrics;
    this.tasks = parts.tasks;
    this.#heartbeatIntervalMs = options.heartbeatIntervalMs ?? 1000;
    this.#workerTimeoutMs = options.workerTimeoutMs ?? 5 * this.#heartbeatIntervalMs;
    this.#registerTimeoutMs = options.registerTimeoutMs ?? 10_000;
    this.#monitorIntervalMs = Math.max(10, Math.min(this.#heartbeatIntervalMs, this.#workerTimeoutMs / 2));
    this.#noWorkers = new NoWorkersWatch(this.#engine, options.noWorkersTimeoutMs ?? 120_000, log);
    this.#monitor = setInterval(() => this.#checkHeartbeats(), this.#monitorIntervalMs);
    this.#monitor.unref();
    server.on('channel', (channel: Channel) => this.#accept(channel));
    server.on('channel-error', (err: unknown, remote: string) => log.warn({ err, remote }, 'control handshake failed'));
  }

  static async start(options: SchedulerOptions = {}): Promise<Scheduler> {
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
    const log = resolveLogger(options.logger);
    // The outbox needs the scheduler's channels, which exist once it is constructed.
    const holder: { scheduler?: Scheduler } = {};
    const engine = new Engine(outbox(() => holder.scheduler), { allowedFailures });
    const metrics = new SchedulerMetrics(engine);
    const tasks = new TaskStream();
    const server = await ControlServer.listen({ host, port: options.port ?? 0, token: options.token, tls: options.tls === undefined ? undefined : serverTls(options.tls) });
    let http: HttpServer | undefined;
    let dashboard: Dashboard | undefined;
    try {
      if (options.httpPort !== undefined) {
        dashboard = await Dashboard.create(
          {
            state: () => snapshot(engine, server.address, http?.address),
            stream: tasks,
            registry: metrics.registry,
            heartbeatIntervalMs: interval,
            workerTimeoutMs: options.workerTimeoutMs ?? 5 * interval,
          },
          options.dashboard,
        );
        http = await listenHttp(options.httpHost ?? host, options.httpPort, {
          metrics,
          state: () => holder.scheduler?.state(),
          extra: dashboard.routes,
          limits: options.http,
          healthy: () => holder.scheduler !== undefined && !holder.scheduler.#closed,
          bearerToken: options.httpToken,
          retireWorkers: (names) => holder.scheduler?.startRetiring(names).map((w) => w.id) ?? [],
          token: options.token,
        });
      }
    } catch (err) {
      dashboard?.close();
      await server.close();
      throw err;
    }
    holder.scheduler = new Scheduler({ server, options, log, http, dashboard, engine, metrics, tasks, allowModules, moduleCacheLimit });
    log.info({ address: server.address, http: http?.address }, 'scheduler started');
    return holder.scheduler;
  }

  get address(): { host: string; port: number } {
    return this.#server.address;
  }

  get httpAddress(): { host: string; port: number } | undefined {
    return this.#http?.address;
  }

  /** A JSON snapshot: workers (with their last heartbeat), task counts by state, clients, counters. */
  state(): SchedulerState {
    return snapshot(this.#engine, this.address, this.httpAddress);
  }

  /**
   * Retires workers (ids or names) as on SIGTERM: each hands what only it holds to the
   * others and exits. Resolves with their ids once every one has left. Unknown names are an
   * InvalidArgumentError before anything starts.
   */
  async retireWorkers(names: readonly string[]): Promise<RetireWorkersResult> {
    const chosen = this.startRetiring(names);
    await Promise.all(chosen.map((w) => this.#gone(w.id)));
    return { retired: chosen.map((w) => w.id) };
  }

  /** @internal Asks the named workers to retire; returns them at once. */
  startRetiring(names: readonly string[]): WorkerRecord[] {
    const all = [...this.#engine.workers.values()];
    const chosen = names.map((name) => {
      const worker = all.find((w) => w.id === name) ?? all.find((w) => w.name === name);
      if (worker === undefined) throw new InvalidArgumentError(`retire-workers: no worker ${JSON.stringify(name)} (there are ${all.map((w) => `${w.id} ${w.name}`).join(', ') || 'none'})`);
      return worker;
    });
    this.#log.info({ workers: chosen.map((w) => w.id) }, 'retiring workers on request');
    this.#engine.retire(chosen);
    return chosen;
  }

  /** Resolves once the worker with this id is no longer registered. */
  #gone(id: string): Promise<void> {
    if (!this.#engine.workers.has(id)) return Promise.resolve();
    return new Promise((resolve) => {
      const waiters = this.#leaving.get(id) ?? [];
      waiters.push(resolve);
      this.#leaving.set(id, waiters);
    });
  }

  /** Stops accepting work and closes every connection; a second caller waits for the same close. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#closed = true;
      clearInterval(this.#monitor);
      this.#dashboard?.close();
      await Promise.all([this.#server.close(), this.#http?.close()]);
      this.#log.info({}, 'scheduler closed');
    })();
    return this.#closing;
  }

  /** @internal The channel of a worker or client (for the outbox). */
  channelOf(id: string): Channel | undefined {
    return this.#channels.get(id);
  }

  #accept(channel: Channel): void {
    const session: { current: Session } = { current: { role: 'none' } };
    // An authenticated peer that never says who it is would hold its connection forever.
    const deadline = setTimeout(() => {
      if (session.current.role !== 'none') return;
      this.#log.warn({ remote: channel.remoteAddress, ms: this.#registerTimeoutMs }, 'control connection did not register; closing it');
      channel.close(new NotRegisteredError(`no register-worker or register-client within ${this.#registerTimeoutMs} ms`));
    }, this.#registerTimeoutMs);
    deadline.unref();
    channel.once('close', () => clearTimeout(deadline));
    const on = (method: string, fn: (params: unknown) => unknown): void => {
      channel.handle(method, (params) => this.#guard(channel, session.current, method, () => fn(params)));
    };
    on(Methods.registerWorker, (params) => {
      const registration = checkRegisterWorker(params);
      checkReachable(registration.data, channel.remoteHost);
      const worker = newWorker(`w-${this.#nextId++}`, registration);
      session.current = { role: 'worker', worker };
      this.#channels.set(worker.id, channel);
      // Before any task: the engine may place tasks naming them as soon as it has the worker.
      for (const shipped of this.#modules.all()) channel.notify(Methods.shipModule, shipped);
      const held = this.#engine.addWorker(worker, registration.keys ?? []);
      this.#log.info({ worker: worker.id, workerName: worker.name, data: worker.data, nthreads: worker.nthreads, ...held }, 'worker registered');
      const result: RegisterWorkerResult = { workerId: worker.id, heartbeatIntervalMs: this.#heartbeatIntervalMs };
      return result;
    });
    on(Methods.registerClient, (params) => {
      const id = `c-${this.#nextId++}`;
      this.#engine.addClient(id, string(object(params, 'register-client params').name, 'register-client: name'));
      session.current = { role: 'client', id };
      this.#channels.set(id, channel);
      this.#log.info({ client: id }, 'client registered');
      return { clientId: id };
    });
    const worker = (): WorkerRecord => (session.current as { worker: WorkerRecord }).worker;
    const clientId = (): string => (session.current as { id: string }).id;
    on(Methods.heartbeat, (params) => {
      const beat = object(params, 'heartbeat') as unknown as WorkerHeartbeat;
      const before = worker().heartbeat?.spillFailure;
      this.#engine.heartbeat(worker(), beat);
      if (typeof beat.spillFailure === 'string' && beat.spillFailure !== before) this.#log.warn({ worker: worker().id, error: beat.spillFailure }, 'worker cannot spill');
    });
    on(Methods.taskStarted, (params) => this.#engine.taskStarted(worker(), string(object(params, 'task-started params').key, 'task-started: key')));
    on(Methods.taskFinished, (params) => {
      const p = object(params, 'task-finished params');
      const size = typeof p.size === 'number' && p.size >= 0 ? p.size : 0;
      const where = typeof p.where === 'string' ? p.where : 'memory';
      const key = string(p.key, 'task-finished: key');
      const seconds = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0);
      const finished = { workerId: worker().id, key, size, where, computeSeconds: seconds(p.computeSeconds), fetchSeconds: seconds(p.fetchSeconds) };
      this.#recordTask(worker(), finished);
      this.#engine.taskFinished(worker(), finished);
    });
    on(Methods.taskErred, (params) => {
      const p = object(params, 'task-erred params');
      this.#engine.taskErred(worker(), string(p.key, 'task-erred: key'), errorInfo(p.error));
    });
    on(Methods.missingData, (params) => {
      const p = object(params, 'missing-data params');
      const holders = Array.isArray(p.holders) ? p.holders.map((h) => object(h, 'missing-data holder')) : [];
      this.#engine.missingData(worker(), {
        workerId: worker().id,
        task: string(p.task, 'missing-data: task'),
        key: string(p.key, 'missing-data: key'),
        holders: holders.map((h) => ({ host: string(h.host, 'missing-data: holder host'), port: Number(h.port) })),
        corrupt: p.corrupt === true,
      });
      if (p.corrupt === true) this.#log.warn({ worker: worker().id, key: p.key, task: p.task }, 'a worker\'s copy of an input was corrupt; dropped, recomputing it if no other holder has it');
    });
    on(Methods.workerClosing, (params) => {
      const reschedule = typeof params === 'object' && params !== null && Array.isArray((params as { reschedule?: unknown }).reschedule) ? (params as { reschedule: unknown[] }).reschedule : [];
      const first = !worker().closing;
      this.#engine.markClosing(worker(), reschedule.filter((k): k is string => typeof k === 'string'));
      if (first) this.#log.info({ worker: worker().id, workerName: worker().name, keys: worker().has.size, rescheduled: reschedule.length }, 'worker retiring');
    });
    on(Methods.addKeys, (params) => {
      const p = object(params, 'add-keys params');
      this.#engine.addKeys(worker(), stringArray(p.keys ?? [], 'add-keys: keys'), stringArray(p.missing ?? [], 'add-keys: missing'));
    });
    on(Methods.retireWorkers, (params) => this.retireWorkers(stringArray(object(params, 'retire-workers params').workers, 'retire-workers: workers')));
    on(ShuffleMethods.get, (params) => this.#shuffles.get(params));
    on(ShuffleMethods.transferred, (params) => this.#shuffles.transferred(params));
    on(Methods.whoHas, (params) => this.#engine.whoHas(stringArray(object(params, 'who-has params').keys, 'who-has: keys')));
    on(Methods.submit, async (params) => {
      const id = clientId();
      const valid = await validateSubmission(params, (key) => this.#engine.tasks.has(key));
      this.#modules.checkGraph(valid.order);
      checkAllowedModules(
        valid.order,
        this.#allowModules,
        (module) => this.#modules.origin(module),
        // A shuffle task runs Spillway's shuffle and the user's split or combine: those are judged.
        (spec) => (isShuffleFunction(spec.fn) ? shuffleUserFunctions(spec) : [spec.fn]),
      );
      if (!this.#engine.clients.has(id)) return { added: 0 }; // it left while its graph was checked
      const result = this.#engine.submit(id, valid);
      this.#log.debug({ client: id, added: result.added, wanted: valid.wanted.length }, 'graph submitted');
      return result;
    });
    on(Methods.release, (params) => {
      this.#engine.release(clientId(), stringArray(object(params, 'release params').keys, 'release: keys'));
      return null;
    });
    on(Methods.progress, () => this.#engine.progress(clientId()));
    on(Methods.uploadModule, (params) => {
      const result = this.#modules.upload(params);
      this.#log.info({ client: clientId(), url: (params as { url: string }).url, module: result.module, workers: result.workers }, 'module uploaded');
      return result;
    });
    channel.on('unhandled', (method: string) => {
      this.#log.warn({ method, remote: channel.remoteAddress }, 'unknown notification');
      if (session.current.role === 'none') channel.close();
    });
    channel.on('handler-error', (method: string, err: unknown) => this.#log.warn({ method, err }, 'notification refused'));
    channel.once('close', () => this.#onClose(session.current));
  }

  /** Checks the caller's role before running a handler; a first message that is not a registration closes the channel. */
  #guard(channel: Channel, session: Session, method: string, run: () => unknown): unknown {
    if (this.#closed) throw new NotRegisteredError('the scheduler is closing');
    const registering = method === Methods.registerWorker || method === Methods.registerClient;
    if (session.role === 'none' && !registering) {
      setImmediate(() => channel.close());
      throw new NotRegisteredError(`${method} before register-worker or register-client; closing the channel`);
    }
    if (session.role !== 'none' && registering) throw new AlreadyRegisteredError(`this channel is already registered as a ${session.role}`);
    if (session.role !== 'worker' && WORKER_METHODS.has(method)) throw new WrongRoleError(`${method} is for workers`);
    if (session.role !== 'client' && CLIENT_METHODS.has(method)) throw new WrongRoleError(`${method} is for clients`);
    if (session.role === 'worker') {
      // Removed (missed heartbeats) while its channel drains: what it still says is stale.
      if (this.#engine.workers.get(session.worker.id) !== session.worker) throw new NotRegisteredError(`worker ${session.worker.id} was removed`);
      session.worker.lastSeen = Date.now();
    }
    return run();
  }

  #onClose(session: Session): void {
    if (session.role === 'worker') {
      this.#channels.delete(session.worker.id);
      if (this.#closed) return;
      const w = session.worker;
      if (w.closing) this.#log.info({ worker: w.id, workerName: w.name }, 'worker retired');
      else this.#log.warn({ worker: w.id, workerName: w.name }, 'worker connection closed');
      this.#removeWorker(w);
    } else if (session.role === 'client') {
      this.#channels.delete(session.id);
      if (this.#closed) return;
      this.#log.info({ client: session.id }, 'client left');
      this.#engine.removeClient(session.id);
    }
  }

  /** Into the task stream and the duration histogram: only the answer to a task this worker was given. */
  #recordTask(worker: WorkerRecord, finished: TaskFinishedParams): void {
    if (!worker.processing.has(finished.key)) return;
    const spec = this.#engine.tasks.get(finished.key)?.spec;
    if (spec === undefined) return;
    // A shipped module is labelled by the file it came from: its versions share one series.
    const fn = this.#modules.named(spec.fn);
    this.#metrics.observeTask(fn, finished.computeSeconds);
    this.tasks.add({
      key: finished.key,
      fn: functionLabel(fn),
      worker: worker.name,
      endedAt: Date.now(),
      computeSeconds: finished.computeSeconds,
      fetchSeconds: finished.fetchSeconds,
    });
  }

  /** Sends a notification to every registered worker; returns how many. */
  #broadcast(method: string, params: unknown): number {
    let sent = 0;
    for (const worker of this.#engine.workers.values()) {
      const channel = this.#channels.get(worker.id);
      if (channel === undefined) continue;
      channel.notify(method, params);
      sent++;
    }
    return sent;
  }

  /** Removes a worker; the others first hear of it, so their fetches from it (perhaps a frozen peer) end now. */
  #removeWorker(worker: WorkerRecord): void {
    if (this.#engine.workers.get(worker.id) !== worker) return;
    const params: WorkerRemovedParams = { workerId: worker.id, data: worker.data };
    for (const other of this.#engine.workers.values()) if (other !== worker) this.#channels.get(other.id)?.notify(Methods.workerRemoved, params);
    const killed = this.#engine.counters.tasksKilledWorkers;
    this.#engine.removeWorker(worker);
    if (this.#engine.counters.tasksKilledWorkers > killed) this.#log.warn({ worker: worker.id, tasks: this.#engine.counters.tasksKilledWorkers - killed }, 'tasks failed with SPW_ERR_KILLED_WORKER');
    for (const resolve of this.#leaving.get(worker.id) ?? []) resolve();
    this.#leaving.delete(worker.id);
  }

  #checkHeartbeats(): void {
    const now = Date.now();
    const gap = now - this.#lastCheck;
    this.#lastCheck = now;
    // Timers run before the sockets are read: after a stall of this process (a blocked loop,
    // SIGSTOP, a VM pause) the workers' heartbeats are still unread, so silence counts from
    // when the scheduler ran again, not from the last message it got round to reading.
    if (gap > 2 * this.#monitorIntervalMs + 100) {
      this.#resumedAt = now;
      this.#log.warn({ stalledMs: gap }, 'the scheduler itself stalled; workers get a full timeout from now');
    }
    for (const worker of [...this.#engine.workers.values()]) {
      const silentMs = now - Math.max(worker.lastSeen, this.#resumedAt);
      if (silentMs <= this.#workerTimeoutMs) continue;
      this.#log.warn({ worker: worker.id, silentMs }, 'worker missed its heartbeats; removing it');
      this.#removeWorker(worker);
      // Destroyed, not ended: a hung worker might never close its side (and never free the channel).
      this.#channels.get(worker.id)?.close(new NotRegisteredError(`worker ${worker.id} missed its heartbeats`));
      this.#channels.delete(worker.id);
    }
    this.#noWorkers.check(now);
  }
}

/** Sends the engine's decisions. Client notifications wait a turn so a submit's answer goes out first. */
function outbox(scheduler: () => Scheduler | undefined): Outbox {
  const send = (id: string, method: string, params: unknown): void => scheduler()?.channelOf(id)?.notify(method, params);
  return {
    computeTask: (worker, params) => send(worker.id, Methods.computeTask, params),
    releaseKeys: (worker, keys) => send(worker.id, Methods.releaseKeys, { keys }),
    cancelTask: (worker, key) => send(worker.id, Methods.cancelTask, { key }),
    keyReady: (client, params) => setImmediate(() => send(client, Methods.keyReady, params)),
    keyErred: (client, params) => setImmediate(() => send(client, Methods.keyErred, params)),
    acquireReplicas: (worker, keys) => send(worker.id, Methods.acquireReplicas, { keys }),
    retire: (worker) => send(worker.id, Methods.retire, {}),
    retired: (worker) => send(worker.id, Methods.retired, {}),
  };
}

function errorInfo(value: unknown): TaskErrorInfo {
  const e = typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
  const info: TaskErrorInfo = {
    name: typeof e.name === 'string' ? e.name : 'Error',
    message: typeof e.message === 'string' ? e.message : String(value),
  };
  if (typeof e.stack === 'string') info.stack = e.stack;
  if (typeof e.code === 'string') info.code = e.code;
  return info;
}
