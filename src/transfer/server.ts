import { EventEmitter } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { InvalidArgumentError } from '../errors.js';
import { withByteOptions, type WithByteOptions } from '../units.js';
import { Connection } from './connection.js';
import { ByteBudget, RequestSlots } from './limits.js';
import { DEFAULT_MAX_FRAME_BYTES } from './parser.js';
import { ConnectionErrors, type ServerCounters, type ServerShared, ServerSession } from './server-session.js';
import type { ServingStore } from './store-like.js';

export interface DataServerOptions {
  /** Interface to bind. Default 127.0.0.1: never exposed unless asked. */
  host?: string;
  /** Default 0: any free port (see `server.address`). */
  port?: number;
  /** Shared secret; when set, every client must prove it holds it before any data moves. */
  token?: string;
  /** TLS settings (key, cert...); when set the server speaks TLS. */
  tls?: tls.TlsOptions;
  /** get-data requests served at once, over all connections; beyond it: "busy". Default 10. */
  maxConcurrentRequests?: number;
  /** Encoded bytes of values being sent at once; a send waits for room. Default 256 MiB. */
  maxBytesInFlight?: number | string;
  /** Largest control frame accepted (key lists, requests). Default 16 MiB. */
  maxFrameBytes?: number | string;
  /** Requests one connection may have at once, the one being served included; one more closes it (ProtocolError). Default 16. */
  maxPipelined?: number;
  /** A connection must finish its handshake within this. Default 10 s. */
  handshakeTimeoutMs?: number;
  /** A connection silent for this long, or not reading what it asked for for this long, is closed. Default 5 min; 0 disables. */
  idleTimeoutMs?: number;
  /** Retry hint sent with "busy". Default 50 ms. */
  busyRetryAfterMs?: number;
  /** Answers generic Request messages (msgpack in, msgpack out); a RequestBytes' raw bytes come as `payload`, views of the socket reads. */
  onRequest?: (body: unknown, payload?: readonly Uint8Array[]) => unknown;
}

export interface DataServerStats extends ServerCounters {
  /** Connections open now. */
  connections: number;
  connectionsTotal: number;
  /** get-data requests being served now. */
  activeRequests: number;
  bytesInFlight: number;
}

const MiB = 1024 * 1024;

/**
 * Serves a store's values to peers. Values leave exactly as the store encodes them: from
 * their file in ~1 MiB chunks when spilled, from their own memory otherwise. Emits
 * 'connection-error' (Error) for every connection that ended badly; the server goes on.
 */
export class DataServer extends EventEmitter {
  private readonly server: net.Server;
  private readonly sessions = new Set<ServerSession>();
  private readonly counters: ServerCounters = {
    requests: 0,
    busyReplies: 0,
    valuesServed: 0,
    missingReplies: 0,
    servedFromDiskBytes: 0,
    servedFromMemoryBytes: 0,
    authFailures: 0,
    protocolErrors: 0,
    aborted: 0,
  };
  /** What its sessions share: the store, settings, limits, counters. */
  private readonly shared: ServerShared;
  private connectionsTotal = 0;
  private addressInfo: { host: string; port: number } | undefined;
  private closing: Promise<void> | undefined;

  private readonly options: WithByteOptions<DataServerOptions, 'maxBytesInFlight' | 'maxFrameBytes'>;

  private constructor(store: ServingStore, given: DataServerOptions) {
    super();
    const options = withByteOptions(given, ['maxBytesInFlight', 'maxFrameBytes'] as const);
    this.options = options;
    const maxConcurrentRequests = options.maxConcurrentRequests ?? 10;
    if (!Number.isInteger(maxConcurrentRequests) || maxConcurrentRequests < 0) {
      throw new InvalidArgumentError(`maxConcurrentRequests must be a non-negative integer, got ${maxConcurrentRequests}`);
    }
    if (options.token !== undefined && options.token.length === 0) throw new InvalidArgumentError('token must not be empty');
    this.shared = {
      store,
      settings: {
        token: options.token,
        handshakeTimeoutMs: options.handshakeTimeoutMs ?? 10_000,
        maxPipelined: options.maxPipelined ?? 16,
        busyRetryAfterMs: options.busyRetryAfterMs ?? 50,
        onRequest: options.onRequest,
      },
      budget: new ByteBudget(options.maxBytesInFlight ?? 256 * MiB),
      slots: new RequestSlots(maxConcurrentRequests),
      counters: this.counters,
      errors: new ConnectionErrors(this),
    };
    const onSocket = (socket: net.Socket): void => this.accept(socket);
    this.server = options.tls !== undefined ? tls.createServer(options.tls, onSocket) : net.createServer(onSocket);
    if (options.tls !== undefined) {
      // A failed TLS handshake never reaches accept(); count it and go on.
      this.server.on('tlsClientError', (err: Error) => this.shared.errors.report(err));
    }
  }

  static async listen(store: ServingStore, options: DataServerOptions = {}): Promise<DataServer> {
    const server = new DataServer(store, options);
    await new Promise<void>((resolve, reject) => {
      server.server.once('error', reject);
      server.server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
        server.server.off('error', reject);
        resolve();
      });
    });
    const info = server.server.address() as AddressInfo;
    server.addressInfo = { host: info.address, port: info.port };
    return server;
  }

  get address(): { host: string; port: number } {
    if (this.addressInfo === undefined) throw new InvalidArgumentError('server is not listening');
    return this.addressInfo;
  }

  stats(): DataServerStats {
    return {
      ...this.counters,
      connections: this.sessions.size,
      connectionsTotal: this.connectionsTotal,
      activeRequests: this.shared.slots.active,
      bytesInFlight: this.shared.budget.inUse,
    };
  }

  private accept(socket: net.Socket): void {
    if (this.closing !== undefined) {
      socket.destroy();
      return;
    }
    this.connectionsTotal++;
    const idleTimeoutMs = this.options.idleTimeoutMs ?? 300_000;
    const connection = new Connection(socket, {
      maxFrameBytes: this.options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES,
      idleTimeoutMs,
      // A peer that stops reading is closed after the same time, even if it keeps sending.
      stallTimeoutMs: idleTimeoutMs,
    });
    const session = new ServerSession(connection, this.shared);
    this.sessions.add(session);
    connection.onClose(() => this.sessions.delete(session));
  }

  /** Stops accepting, closes every connection (transfers in progress are cut). */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const session of this.sessions) session.connection.socket.destroy();
    });
    return this.closing;
  }
}
