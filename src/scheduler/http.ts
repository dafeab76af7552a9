import { type HttpLimits, HttpServer, type RouteHandler, send, sendJson } from '../http/server.js';
import type { SchedulerMetrics } from './metrics.js';

export interface SchedulerHttpSources {
  metrics: SchedulerMetrics;
  /** The scheduler's JSON snapshot (undefined while it is being constructed). */
  state: () => unknown;
  /** More routes (the dashboard's). */
  extra?: Readonly<Record<string, RouteHandler>>;
  limits?: HttpLimits;
}

/** The scheduler's HTTP server: GET /metrics (Prometheus text), GET /api/state (JSON), and any extra routes; 404 for the rest. */
export function listenHttp(host: string, port: number, sources: SchedulerHttpSources): Promise<HttpServer> {
  const { metrics } = sources;
  return HttpServer.listen(host, port, {
    '/metrics': async (_req, res) => send(res, 200, metrics.contentType, await metrics.render()),
    '/api/state': (_req, res) => sendJson(res, 200, sources.state() ?? null),
    ...sources.extra,
  }, sources.limits);
}
