import { timingSafeEqual } from 'node:crypto';
import { errorMessage } from '../errors.js';
import { type HttpLimits, HttpServer, type RouteHandler, readJsonBody, send, sendJson, sendText } from '../http/server.js';
import type { SchedulerLifecycle } from './lifecycle.js';
import type { SchedulerMetrics } from './metrics.js';

/** What the scheduler's HTTP server serves. */
export interface SchedulerHttpParts {
  metrics: SchedulerMetrics;
  /** Its JSON snapshot (GET /api/state), and the workers it retires on POST /api/retire-workers. */
  scheduler: { state(): unknown; startRetiring(names: string[]): { id: string }[] };
  /** GET /health answers 200 until the scheduler closes, then 503. */
  life: Pick<SchedulerLifecycle, 'closed'>;
  /** More routes (the dashboard's). */
  extra?: Readonly<Record<string, RouteHandler>>;
  limits?: HttpLimits;
  /** Required of every route but /health (`Authorization: Bearer <token>`). */
  bearerToken?: string;
  /** The cluster's token: without a bearerToken, POST routes need `Authorization: Bearer <it>` (when there is one). */
  token?: string;
}

/**
 * The scheduler's HTTP server: GET /metrics (Prometheus text), GET /api/state (JSON), GET
 * /health (for readiness and liveness probes: never behind the bearer token), and any extra
 * routes; 404 for the rest.
 */
export function listenHttp(host: string, port: number, parts: SchedulerHttpParts): Promise<HttpServer> {
  const { metrics } = parts;
  return HttpServer.listen(host, port, {
    '/metrics': async (_req, res) => send(res, 200, metrics.contentType, await metrics.render()),
    '/api/state': (_req, res) => sendJson(res, 200, parts.scheduler.state()),
    ...parts.extra,
    '/health': (_req, res) => {
      const ok = !parts.life.closed;
      send(res, ok ? 200 : 503, 'text/plain; charset=utf-8', ok ? 'ok\n' : 'closing\n');
    },
  }, {
    ...parts.limits,
    bearerToken: parts.bearerToken,
    open: ['/health'],
    post: {
      '/api/retire-workers': async (req, res) => {
        // An action: with no HTTP token set, the cluster's own token guards it.
        if (parts.bearerToken === undefined && !authorized(req.headers.authorization, parts.token)) {
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
        try {
          sendJson(res, 202, { retiring: parts.scheduler.startRetiring(names).map((w) => w.id) });
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
