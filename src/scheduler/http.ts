import { type HttpLimits, HttpServer, type RouteHandler, send, sendJson } from '../http/server.js';
import type { SchedulerMetrics } from './metrics.js';

export interface SchedulerHttpSources {
  metrics: SchedulerMetrics;
  /** The scheduler's JSON snapshot (undefined while it is being constructed). */
  state: () => unknown;
  /** More routes (the dashboard's). */
  extra?: Readonly<Record<string, RouteHandler>>;
  limits?: HttpLimits;
  /** Whether the scheduler is serving (GET /health: 200, else 503). */
  healthy?: () => boolean;
  /** Required of every route but /health (`Authorization: Bearer <token>`). */
  bearerToken?: string;
}

/**
 * The scheduler's HTTP server: GET /metrics (Prometheus text), GET /api/state (JSON), GET
 * /health (for readiness and liveness probes: never behind the bearer token), and any extra
 * routes; 404 for the rest.
 */
export function listenHttp(host: string, port: number, sources: SchedulerHttpSources): Promise<HttpServer> {
  const { metrics } = sources;
  return HttpServer.listen(host, port, {
    '/metrics': async (_req, res) => send(res, 200, metrics.contentType, await metrics.render()),
    '/api/state': (_req, res) => sendJson(res, 200, sources.state() ?? null),
    ...sources.extra,
    '/health': (_req, res) => {
      const ok = sources.healthy?.() ?? true;
      send(res, ok ? 200 : 503, 'text/plain; charset=utf-8', ok ? 'ok\n' : 'closing\n');
    },
  }, { ...sources.limits, bearerToken: sources.bearerToken, open: ['/health'] });
}
