import { readFile } from 'node:fs/promises';
import { Counter, Gauge, type Registry } from 'prom-client';
import { InvalidArgumentError } from '../errors.js';
import { byteOption } from '../units.js';
import { EventStream } from '../http/event-stream.js';
import { type RouteHandler, send, toJson } from '../http/server.js';
import type { SchedulerState } from '../scheduler/snapshot.js';
import type { TaskStream } from '../scheduler/task-stream.js';
import { FrameBuilder } from './frames.js';

export interface DashboardOptions {
  /** How often a frame goes to the open pages (ms). Default 500. */
  intervalMs?: number;
  /** Bytes one page may have waiting to be sent before it is dropped. Default 4 MiB. */
  clientBufferBytes?: number | string;
  /** Pages connected at once. Default 64. */
  maxClients?: number;
}

/** The page's files, served as they are: hand-written, no build step, no CDN. */
const ASSETS: Record<string, { file: string; type: string }> = {
  '/status': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/status/dashboard.js': { file: 'dashboard.js', type: 'text/javascript; charset=utf-8' },
  '/status/dashboard.css': { file: 'dashboard.css', type: 'text/css; charset=utf-8' },
};

/** `static/dashboard/` at the package's root, from src/dashboard/ (tsx) and dist/dashboard/ (built) alike. */
const ASSET_DIR = new URL('../../static/dashboard/', import.meta.url);

/** The last tasks an opening page gets, to draw the stream's recent past. */
const INITIAL_STREAM = 500;

/**
 * The scheduler's dashboard: GET /status (the page) and GET /api/stream (Server-Sent
 * Events: an `init` event with the memory history and the recent task stream, then a
 * `frame` every interval). Frames are built whether or not a page is open, so the memory
 * history is there when one opens; a frame is serialized once for every page.
 */
export class Dashboard {
  readonly #frames: FrameBuilder;
  readonly #events: EventStream;
  readonly #timer: NodeJS.Timeout;
  readonly #assets: Map<string, { body: Buffer; type: string }>;
  readonly #stream: TaskStream;

  private constructor(frames: FrameBuilder, events: EventStream, assets: Map<string, { body: Buffer; type: string }>, stream: TaskStream, intervalMs: number) {
    this.#frames = frames;
    this.#stream = stream;
    this.#events = events;
    this.#assets = assets;
    this.#timer = setInterval(() => this.#tick(), intervalMs);
    this.#timer.unref();
  }

  static async create(
    sources: { state: () => SchedulerState; stream: TaskStream; registry: Registry; heartbeatIntervalMs: number; workerTimeoutMs: number },
    options: DashboardOptions = {},
  ): Promise<Dashboard> {
    const intervalMs = options.intervalMs ?? 500;
    const clientBufferBytes = byteOption(options.clientBufferBytes, 'dashboard.clientBufferBytes') ?? 4 * 2 ** 20;
    const maxClients = options.maxClients ?? 64;
    if (!Number.isInteger(intervalMs) || intervalMs < 10 || intervalMs > 60_000) throw new InvalidArgumentError(`dashboard.intervalMs must be a whole number of ms from 10 to 60000, got ${intervalMs}`);
    if (!Number.isSafeInteger(clientBufferBytes) || clientBufferBytes < 1) throw new InvalidArgumentError(`dashboard.clientBufferBytes must be a positive whole number, got ${clientBufferBytes}`);
    if (!Number.isInteger(maxClients) || maxClients < 1) throw new InvalidArgumentError(`dashboard.maxClients must be a positive integer, got ${maxClients}`);
    const assets = new Map<string, { body: Buffer; type: string }>();
    for (const [path, { file, type }] of Object.entries(ASSETS)) assets.set(path, { body: await readFile(new URL(file, ASSET_DIR)), type });
    const dropped = new Counter({
      name: 'spillway_scheduler_dashboard_dropped_clients_total',
      help: 'Dashboard pages disconnected because they fell too far behind the event stream',
      registers: [sources.registry],
    });
    const events = new EventStream({
      maxBufferedBytes: clientBufferBytes,
      maxClients,
      onDrop: () => dropped.inc(),
    });
    new Gauge({
      name: 'spillway_scheduler_dashboard_clients',
      help: 'Dashboard pages connected to the event stream',
      registers: [sources.registry],
      collect() {
        this.set(events.clients);
      },
    });
    const frames = new FrameBuilder(
      { intervalMs, heartbeatIntervalMs: sources.heartbeatIntervalMs, workerTimeoutMs: sources.workerTimeoutMs, historyMs: 5 * 60_000, streamPerFrame: 1000 },
      sources.state,
      sources.stream,
    );
    return new Dashboard(frames, events, assets, sources.stream, intervalMs);
  }

  get routes(): Record<string, RouteHandler> {
    const routes: Record<string, RouteHandler> = {
      '/api/stream': (req, res) => this.#events.accept(req, res, () => this.#init()),
    };
    for (const [path, asset] of this.#assets) {
      routes[path] = (_req, res) => send(res, 200, asset.type, asset.body, { 'cache-control': 'no-cache' });
    }
    return routes;
  }

  /** Pages connected now, and pages dropped for being too slow so far. */
  get clients(): { connected: number; dropped: number } {
    return { connected: this.#events.clients, dropped: this.#events.dropped };
  }

  /** @internal For tests: a message to every page, as a frame would be. */
  broadcast(message: string): void {
    this.#events.broadcast(message);
  }

  close(): void {
    clearInterval(this.#timer);
    this.#events.close();
  }

  #tick(): void {
    const frame = this.#frames.next();
    if (this.#events.clients > 0) this.#events.broadcast(EventStream.format('frame', toJson(frame)));
  }

  #init(): string {
    const frame = this.#frames.last;
    return EventStream.format('init', toJson({ ...frame, stream: this.#recent(), history: this.#frames.history() }));
  }

  #recent(): ReturnType<TaskStream['since']> {
    return this.#stream.since(Math.max(0, this.#stream.seq - INITIAL_STREAM));
  }
}
