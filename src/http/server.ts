import { timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import { InvalidArgumentError, errorMessage } from '../errors.js';
import { browserToken, tokenCookie } from './browser-token.js';

export interface HttpServerOptions {
  /**
   * Every route but those in `open` requires `Authorization: Bearer <token>` (401
   * otherwise); a browser may give it as `?access_token=` instead, or the cookie set from it
   * (browser-token.ts).
   */
  bearerToken?: string;
  /** Paths served without the token (health probes). */
  open?: readonly string[];
  /** Routes that take POST instead of GET (an action, not a reading). */
  post?: Readonly<Record<string, RouteHandler>>;
}

/** Constant-time comparison, so the answer's timing does not leak the token. */
function sameSecret(given: string | undefined, expected: Buffer): boolean {
  if (given === undefined) return false;
  const bytes = Buffer.from(given);
  return bytes.length === expected.length && timingSafeEqual(bytes, expected);
}

/** Answers one GET (or HEAD) request; a thrown error or a rejected promise becomes a 500. */
export type RouteHandler = (req: http.IncomingMessage, res: http.ServerResponse) => void | Promise<void>;

/** What one slow or silent client may hold: a monitoring port must not take the process's descriptors. */
export interface HttpLimits {
  /** A connection that has not sent a request's complete headers this long after it opened (or after its last request) gets 408 and is closed. Default 10 s. */
  headersTimeoutMs?: number;
  /** A request not received whole this long after it began gets 408 and is closed. Default 30 s. */
  requestTimeoutMs?: number;
  /** Connections open at once; more are closed as they arrive. Default 100. */
  maxConnections?: number;
}

/**
 * A small HTTP server for monitoring routes: exact paths, GET and HEAD only, 404 for any
 * other path and 405 for any other method. Shared by the scheduler and the worker.
 */
export class HttpServer {
  readonly #server: http.Server;

  private constructor(server: http.Server) {
    this.#server = server;
  }

  static listen(host: string, port: number, routes: Readonly<Record<string, RouteHandler>>, limits: HttpLimits & HttpServerOptions = {}): Promise<HttpServer> {
    const headersTimeout = limits.headersTimeoutMs ?? 10_000;
    const requestTimeout = limits.requestTimeoutMs ?? 30_000;
    const maxConnections = limits.maxConnections ?? 100;
    if (!(Number.isSafeInteger(headersTimeout) && headersTimeout > 0)) throw new InvalidArgumentError(`headersTimeoutMs must be a positive whole number, got ${headersTimeout}`);
    if (!(Number.isSafeInteger(requestTimeout) && requestTimeout >= headersTimeout)) {
      throw new InvalidArgumentError(`requestTimeoutMs must be a whole number at least headersTimeoutMs, got ${requestTimeout}`);
    }
    if (!(Number.isSafeInteger(maxConnections) && maxConnections > 0)) throw new InvalidArgumentError(`maxConnections must be a positive whole number, got ${maxConnections}`);
    const table = new Map(Object.entries(routes));
    const posts = new Map(Object.entries(limits.post ?? {}));
    const open = new Set(limits.open ?? []);
    const expected = limits.bearerToken === undefined ? undefined : Buffer.from(`Bearer ${limits.bearerToken}`);
    const expectedToken = limits.bearerToken === undefined ? undefined : Buffer.from(limits.bearerToken);
    // Node reads the timeouts at construction, and checks them every connectionsCheckingInterval
    // (30 s by default): a silent connection is closed within a fraction of its timeout.
    const options: http.ServerOptions = { headersTimeout, requestTimeout, connectionsCheckingInterval: Math.max(100, Math.min(1000, headersTimeout / 4)) };
    const server = http.createServer(options, (req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      const isPost = posts.has(path);
      const route = isPost ? posts.get(path) : table.get(path);
      if (route === undefined) return sendText(res, 404, 'not found\n');
      if (expected !== undefined && expectedToken !== undefined && !open.has(path) && !sameSecret(req.headers.authorization, expected)) {
        const fromBrowser = browserToken(req);
        if (fromBrowser === undefined || !sameSecret(fromBrowser.token, expectedToken)) {
          res.setHeader('www-authenticate', 'Bearer');
          return sendText(res, 401, 'a bearer token is required (Authorization: Bearer <token>, or ?access_token=<token> from a browser)\n');
        }
        if (fromBrowser.fromQuery) res.setHeader('set-cookie', tokenCookie(fromBrowser.token));
      }
      if (isPost ? req.method !== 'POST' : req.method !== 'GET' && req.method !== 'HEAD') {
        res.setHeader('allow', isPost ? 'POST' : 'GET, HEAD');
        return sendText(res, 405, isPost ? 'only POST\n' : 'only GET and HEAD\n');
      }
      const fail = (err: unknown): void => {
        if (res.headersSent) res.destroy();
        else sendText(res, 500, `${errorMessage(err)}\n`);
      };
      try {
        const done = route(req, res);
        if (done !== undefined) done.catch(fail);
      } catch (err) {
        fail(err);
      }
    });
    // Idle monitoring connections must not keep close() waiting.
    server.keepAliveTimeout = 1000;
    server.maxConnections = maxConnections;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve(new HttpServer(server));
      });
    });
  }

  get address(): { host: string; port: number } {
    const info = this.#server.address();
    if (info === null || typeof info === 'string') return { host: '', port: 0 };
    return { host: info.address, port: info.port };
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }
}

/** A complete response; HEAD gets the headers only. */
export function send(res: http.ServerResponse, status: number, type: string, body: string | Buffer, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), ...headers });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

export function sendText(res: http.ServerResponse, status: number, body: string): void {
  send(res, status, 'text/plain; charset=utf-8', body);
}

/** JSON; a 64-bit integer passed through from a heartbeat arrives as a BigInt and leaves as a number. */
export function sendJson(res: http.ServerResponse, status: number, value: unknown): void {
  send(res, status, 'application/json', toJson(value));
}

export function toJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? Number(v) : v)) ?? 'null';
}

/** `http://host:port` with IPv6 hosts in brackets and a wildcard host shown as loopback. */
export function httpUrl(address: { host: string; port: number }, path = ''): string {
  const host = address.host === '0.0.0.0' ? '127.0.0.1' : address.host === '::' ? '::1' : address.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${address.port}${path}`;
}

/** The body of a request as JSON, at most `maxBytes`; rejects with a message for a 400. */
export function readJsonBody(req: http.IncomingMessage, maxBytes = 64 * 1024): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    req.on('data', (chunk: Buffer) => {
      length += chunk.length;
      if (length > maxBytes) {
        reject(new Error(`request body over ${maxBytes} bytes`));
        req.destroy();
      } else chunks.push(chunk);
    });
    req.on('error', reject);
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown);
      } catch {
        reject(new Error('request body is not JSON'));
      }
    });
  });
}
