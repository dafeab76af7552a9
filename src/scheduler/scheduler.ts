import { InvalidArgumentError } from '../errors.js';
import { Methods, type RetireWorkersResult } from '../cluster/protocol.js';
import { type Channel, ControlServer } from '../control/index.js';
import type { HttpServer } from '../http/server.js';
import { Dashboard } from '../dashboard/dashboard.js';
import { serverTls } from '../transfer/tls.js';
import { ShuffleExtension } from '../shuffle/scheduler-extension.js';
import { ControlChannels, channelOutbox } from './channels.js';
import { WorkerDepartures } from './departures.js';
import { Engine } from './engine.js';
import { listenHttp } from './http.js';
import { SchedulerLifecycle } from './lifecycle.js';
import { type Logger, resolveLogger } from './log.js';
import { SchedulerMetrics } from './metrics.js';
import { ModuleRegistry } from './modules.js';
import { NoWorkersWatch } from './no-workers.js';
import { type ResolvedSchedulerOptions, type SchedulerOptions, resolveSchedulerOptions } from './options.js';
import { ControlSessions } from './sessions.js';
import { SilentWorkers } from './silent-workers.js';
import { type SchedulerState, snapshot } from './snapshot.js';
import { TaskStream } from './task-stream.js';
import type { WorkerRecord } from './workers.js';

/**
 * The scheduler: accepts workers and clients on a ControlServer, keeps the task graph and
 * where every key lives (Engine), and serves /metrics and /api/state over HTTP.
 */
export class Scheduler {
  readonly #server: ControlServer;
  readonly #engine: Engine;
  readonly #log: Logger;
  readonly #channels: ControlChannels;
  readonly #departures: WorkerDepartures;
  readonly #silent: SilentWorkers;
  readonly #metrics: SchedulerMetrics;
  readonly #life = new SchedulerLifecycle();
  #http: HttpServer | undefined;
  #dashboard: Dashboard | undefined;
  /** The last finished tasks: where they ran, how long, how long they waited for data. */
  readonly tasks = new TaskStream();
  #closing: Promise<void> | undefined;

  private constructor(server: ControlServer, options: ResolvedSchedulerOptions, log: Logger) {
    this.#server = server;
    this.#log = log;
    const channels = (this.#channels = new ControlChannels());
    const engine = (this.#engine = new Engine(channelOutbox(channels), { allowedFailures: options.allowedFailures }));
    const modules = new ModuleRegistry({
      limitBytes: options.moduleCacheLimit,
      allowModules: options.allowModules,
      outbox: {
        ship: (params) => channels.broadcast(engine.workers.values(), Methods.shipModule, params),
        forget: (params) => channels.broadcast(engine.workers.values(), Methods.forgetModule, params),
      },
    });
    this.#metrics = new SchedulerMetrics(engine);
    const departures = (this.#departures = new WorkerDepartures(engine, channels, log));
    const noWorkers = new NoWorkersWatch(engine, options.noWorkersTimeoutMs, log);
    const monitorIntervalMs = Math.max(10, Math.min(options.heartbeatIntervalMs, options.workerTimeoutMs / 2));
    this.#silent = new SilentWorkers({ engine, channels, departures, noWorkers, log }, options.workerTimeoutMs, monitorIntervalMs);
    const sessions = new ControlSessions({
      engine,
      channels,
      departures,
      modules,
      shuffles: new ShuffleExtension(engine, log),
      metrics: this.#metrics,
      tasks: this.tasks,
      life: this.#life,
      log,
      scheduler: this,
      allowModules: options.allowModules,
      heartbeatIntervalMs: options.heartbeatIntervalMs,
      registerTimeoutMs: options.registerTimeoutMs,
    });
    server.on('channel', (channel: Channel) => sessions.accept(channel));
    server.on('channel-error', (err: unknown, remote: string) => log.warn({ err, remote }, 'control handshake failed'));
  }

  static async start(options: SchedulerOptions = {}): Promise<Scheduler> {
    const opts = resolveSchedulerOptions(options);
    const log = resolveLogger(opts.logger);
    const server = await ControlServer.listen({ host: opts.host, port: opts.port ?? 0, token: opts.token, tls: opts.tls === undefined ? undefined : serverTls(opts.tls) });
    const scheduler = new Scheduler(server, opts, log);
    if (opts.httpPort !== undefined) {
      try {
        await scheduler.#serveHttp(opts, opts.httpPort);
      } catch (err) {
        await scheduler.#stop();
        throw err;
      }
    }
    log.info({ address: server.address, http: scheduler.httpAddress }, 'scheduler started');
    return scheduler;
  }

  /** /metrics, /api/state, /health and the dashboard. */
  async #serveHttp(opts: ResolvedSchedulerOptions, port: number): Promise<void> {
    const metrics = this.#metrics;
    this.#dashboard = await Dashboard.create(
      {
        state: () => this.state(),
        stream: this.tasks,
        registry: metrics.registry,
        heartbeatIntervalMs: opts.heartbeatIntervalMs,
        workerTimeoutMs: opts.workerTimeoutMs,
      },
      opts.dashboard,
    );
    this.#http = await listenHttp(opts.httpHost ?? opts.host, port, {
      metrics,
      scheduler: this,
      life: this.#life,
      extra: this.#dashboard.routes,
      limits: opts.http,
      bearerToken: opts.httpToken,
      token: opts.token,
    });
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
    await Promise.all(chosen.map((w) => this.#departures.gone(w.id)));
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

  /** Stops accepting work and closes every connection; a second caller waits for the same close. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#stop();
      this.#log.info({}, 'scheduler closed');
    })();
    return this.#closing;
  }

  async #stop(): Promise<void> {
    this.#life.closed = true;
    this.#silent.stop();
    this.#dashboard?.close();
    await Promise.all([this.#server.close(), this.#http?.close()]);
  }

  /** @internal The channel of a worker or client. */
  channelOf(id: string): Channel | undefined {
    return this.#channels.get(id);
  }
}
