import { Registry } from 'prom-client';
import type { FunctionRef, WorkerHeartbeat } from '../cluster/protocol.js';
import { HttpServer, send, sendJson } from '../http/server.js';
import { renderWithProcessMetrics } from '../metrics/process.js';
import { functionLabel, taskDurationHistogram } from '../metrics/task-duration.js';
import { registerWorkerFamilies } from '../metrics/worker-families.js';

export interface WorkerMonitoringSources {
  name: string;
  memoryLimit: number;
  /** The worker's figures now (the heartbeat's content). */
  figures: () => WorkerHeartbeat;
  /** Registered and connected to the scheduler, not closing. */
  healthy: () => boolean;
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

  constructor(private readonly sources: WorkerMonitoringSources) {
    registerWorkerFamilies(this.registry, () => [{ name: sources.name, memoryLimit: sources.memoryLimit, heartbeat: sources.figures() }]);
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
        const ok = this.sources.healthy();
        sendJson(res, ok ? 200 : 503, { status: ok ? 'ok' : 'unavailable', worker: this.sources.name });
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
