import { Registry } from 'prom-client';
import type { FunctionRef } from '../cluster/protocol.js';
import { HttpServer, send, sendJson } from '../http/server.js';
import { renderWithProcessMetrics } from '../metrics/process.js';
import { functionLabel, taskDurationHistogram } from '../metrics/task-duration.js';
import { registerWorkerFamilies } from '../metrics/worker-families.js';
import type { Heartbeat } from './heartbeat.js';
import type { WorkerLifecycle } from './lifecycle.js';
import type { SchedulerLink } from './scheduler-link.js';

/** What a worker's monitoring reports on. */
export interface WorkerMonitoringParts {
  readonly name: string;
  readonly memoryLimit: number;
  /** The worker's figures now (the heartbeat's content). */
  readonly heartbeat: Pick<Heartbeat, 'figures'>;
  /** GET /health says healthy while the worker is not closing and its link to the scheduler is open. */
  readonly life: Pick<WorkerLifecycle, 'closed'>;
  readonly link: Pick<SchedulerLink, 'closed'>;
}

/**
 * A worker's own Prometheus registry (the `spillway_worker_*` families for itself, task
 * durations, the process's default metrics) and, when asked for, the HTTP server that
 * serves it: GET /metrics and GET /health.
 */
export class WorkerMonitoring {
  readonly registry = new Registry();
  readonly #durations = taskDurationHistogram(this.registry);
  #http: HttpServer | undefined;

  constructor(private readonly parts: WorkerMonitoringParts) {
    registerWorkerFamilies(this.registry, () => [{ name: parts.name, memoryLimit: parts.memoryLimit, heartbeat: parts.heartbeat.figures() }]);
  }

  observeTask(fn: FunctionRef, seconds: number): void {
    if (Number.isFinite(seconds) && seconds >= 0) this.#durations.observe({ function: functionLabel(fn) }, seconds);
  }

  /** Serves the routes; with `bearerToken`, /metrics requires it (/health stays open for probes). */
  async listen(host: string, port: number, bearerToken?: string): Promise<void> {
    this.#http = await HttpServer.listen(host, port, {
      '/metrics': async (_req, res) => send(res, 200, this.registry.contentType, await renderWithProcessMetrics(this.registry)),
      // 503 once the worker is closing or has lost its scheduler, so an orchestrator restarts it.
      '/health': (_req, res) => {
        const ok = !this.parts.life.closed && !this.parts.link.closed;
        sendJson(res, ok ? 200 : 503, { status: ok ? 'ok' : 'unavailable', worker: this.parts.name });
      },
    }, { bearerToken, open: ['/health'] });
  }

  get httpAddress(): { host: string; port: number } | undefined {
    return this.#http?.address;
  }

  async close(): Promise<void> {
    await this.#http?.close();
  }
}
