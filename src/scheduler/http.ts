import { timingSafeEqual } from 'node:crypto';
import { errorMessage } from '../errors.js';
import { type HttpLimits, HttpServer, type RouteHandler, readJsonBody, send, sendJson, sendText } from '../http/server.js';
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
  /** POST /api/retire-workers `{"workers": [ids or names]}`: starts retiring them; answers their ids. */
  retireWorkers?: (names: string[]) => string[];
  /** The cluster's token: without a bearerToken, POST routes need `Authorization: Bearer <it>` (when there is one). */
  token?: string;
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
  }, {
    ...sources.limits,
    bearerToken: sources.bearerToken,
    open: ['/health'],
    post: {
      '/api/retire-workers': async (req, res) => {
        // An action: with no HTTP token set, the cluster's own token guards it.
        if (sources.bearerToken === undefined && !authorized(req.headers.authorization, sources.token)) {
          return sendText(res, 401, 'needs Authorization: Bearer <the cluster token>\n');
        }
        let names: string[];
        try {
          const body = await readJsonBody(req);
          const workers = (body as { workers?: unknown } | null)?.workers;
          if (!Array.isArray(workers) || !workers.every((w): w is string => typeof w === 'string')) throw new Error('expected {"workers": ["w-1", "name", ...]}');
          names = workers;
        } catch (err) {
          return sendText(res, 400, `${errorMessage(err)}\n`);
        }
        if (sources.retireWorkers === undefined) return sendText(res, 404, 'not found\n');
        try {
          sendJson(res, 202, { retiring: sources.retireWorkers(names) });
        } catch (err) {
          sendText(res, 400, `${errorMessage(err)}\n`);
        }
      },
    },
  });
}

/** Constant-time check of a bearer token (no token configured: anyone on the HTTP port may). */
function authorized(header: string | undefined, token: string | undefined): boolean {
  if (token === undefined || token === '') return true;
  const given = Buffer.from(/^Bearer (.+)$/.exec(header ?? '')?.[1] ?? '');
  const expected = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
