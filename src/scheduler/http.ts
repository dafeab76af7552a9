import http from 'node:http';
import { errorMessage } from '../errors.js';

export interface HttpRoutes {
  metrics: () => Promise<string>;
  contentType: string;
  state: () => unknown;
}

/** GET /metrics (Prometheus text) and GET /api/state (JSON); 404 for anything else. */
export class HttpEndpoint {
  readonly #server: http.Server;

  private constructor(server: http.Server) {
    this.#server = server;
  }

  static listen(host: string, port: number, routes: HttpRoutes): Promise<HttpEndpoint> {
    const server = http.createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method !== 'GET' && req.method !== 'HEAD') return reply(res, 405, 'text/plain', 'only GET\n');
      if (path === '/metrics') {
        routes.metrics().then(
          (text) => reply(res, 200, routes.contentType, text),
          (err: unknown) => reply(res, 500, 'text/plain', `${err instanceof Error ? err.message : String(err)}\n`),
        );
      } else if (path === '/api/state') {
        let body: string;
        try {
          // Heartbeats are passed through as sent: a 64-bit integer arrives as a BigInt.
          body = JSON.stringify(routes.state(), (_key, value: unknown) => (typeof value === 'bigint' ? Number(value) : value)) ?? 'null';
        } catch (err) {
          return reply(res, 500, 'text/plain', `${errorMessage(err)}\n`);
        }
        reply(res, 200, 'application/json', body);
      } else {
        reply(res, 404, 'text/plain', 'not found\n');
      }
    });
    // Idle monitoring connections must not keep close() waiting.
    server.keepAliveTimeout = 1000;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve(new HttpEndpoint(server));
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

function reply(res: http.ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
