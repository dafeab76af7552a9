import type http from 'node:http';
import { sendText } from './server.js';

export interface EventStreamOptions {
  /** Bytes a client may have waiting to be sent (in Node's buffer, beyond the kernel's): past it the client is dropped. */
  maxBufferedBytes: number;
  /** Clients at once; more get 503. */
  maxClients: number;
  /** Told of each client dropped for being too slow. */
  onDrop?: () => void;
}

/**
 * Server-Sent Events to any number of clients, without ever waiting for one: every write is
 * fire-and-forget, a client that falls more than `maxBufferedBytes` behind is disconnected
 * (it reconnects, as EventSource does, and starts again from a fresh snapshot), and one that
 * went away is forgotten when its socket closes. A broadcast serializes its message once.
 */
export class EventStream {
  readonly #clients = new Set<http.ServerResponse>();
  #dropped = 0;

  constructor(private readonly options: EventStreamOptions) {}

  get clients(): number {
    return this.#clients.size;
  }

  /** Clients dropped so far for being too slow. */
  get dropped(): number {
    return this.#dropped;
  }

  /** Takes over a request: answers with the event-stream headers and `first` (the client's starting snapshot). */
  accept(req: http.IncomingMessage, res: http.ServerResponse, first: () => string): void {
    if (this.#clients.size >= this.options.maxClients) {
      res.setHeader('retry-after', '5');
      return sendText(res, 503, 'too many event-stream clients\n');
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      // Proxies that buffer responses would hold the events back.
      'x-accel-buffering': 'no',
    });
    if (req.method === 'HEAD') return void res.end();
    req.socket.setNoDelay(true);
    // A monitoring stream must not keep a process alive, nor time out between events.
    req.socket.setTimeout(0);
    this.#clients.add(res);
    const forget = (): void => void this.#clients.delete(res);
    res.once('close', forget);
    res.once('error', forget);
    res.write(`retry: 2000\n\n${first()}`);
  }

  /** One event in the wire format: `event: name` then the data, one `data:` line per line. */
  static format(event: string, data: string): string {
    return `event: ${event}\ndata: ${data.split('\n').join('\ndata: ')}\n\n`;
  }

  /** Sends to every client; drops those whose backlog is over the limit. Never waits. */
  broadcast(message: string): void {
    for (const res of this.#clients) {
      if (res.writableLength > this.options.maxBufferedBytes) {
        this.#drop(res);
        continue;
      }
      res.write(message);
    }
  }

  #drop(res: http.ServerResponse): void {
    this.#clients.delete(res);
    this.#dropped++;
    this.options.onDrop?.();
    res.destroy();
  }

  /** Ends every stream (the server is closing). */
  close(): void {
    for (const res of this.#clients) res.destroy();
    this.#clients.clear();
  }
}
