import { EventEmitter } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import type { Packr } from 'msgpackr';
import { msgpackr } from '../codec/msgpackr.js';
import { ClosedError, SpillwayError, errorMessage } from '../errors.js';
import { Connection } from '../transfer/connection.js';
import { ProtocolError, RemoteError, TransferError, TransferTimeoutError } from '../transfer/errors.js';
import { type Message, MessageType } from '../transfer/messages.js';
import { serializeError, serializeRequest, serializeResponse } from '../transfer/serializer.js';
import { asTlsError } from '../transfer/tls.js';
import { HandshakeReader, type HandshakeSide, clientHandshake, handshakeTypes, serverHandshake } from './handshake.js';

let messagePackr: Packr | undefined;

/** The packer of control messages, made on first use. */
function packr(): Packr {
  // variableMapSize: graphs of more than 65 535 tasks are one map.
  return (messagePackr ??= new (msgpackr().Packr)({ useRecords: false, moreTypes: true, variableMapSize: true }));
}

export type Handler = (params: unknown, channel: Channel) => unknown;

export interface ChannelOptions {
  token?: string;
  tls?: tls.ConnectionOptions;
  /** Handshake and connect timeout. Default 10 s. */
  timeoutMs?: number;
  /** Largest control frame accepted. Default 64 MiB (graphs can be large). */
  maxFrameBytes?: number;
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout | undefined;
}

/**
 * A control-plane connection: after the handshake, either side may send requests (answered
 * with a response or an error) and notifications (no answer) to named methods, with
 * msgpack bodies. Scheduler ↔ worker and scheduler ↔ client use it. Emits 'close' (err?).
 */
export class Channel extends EventEmitter {
  readonly #connection: Connection;
  readonly #handlers = new Map<string, Handler>();
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #closed = false;

  private constructor(connection: Connection) {
    super();
    this.#connection = connection;
    connection.onClose((err) => this.#onClose(err));
  }

  /** Connects to a control server and completes the handshake. */
  static async connect(address: { host: string; port: number }, options: ChannelOptions = {}): Promise<Channel> {
    const timeoutMs = options.timeoutMs ?? 10_000;
    try {
      const socket = await openSocket(address, options.tls, timeoutMs);
      return await Channel.#start(socket, options, 'client', (connection, reader) => clientHandshake(connection, reader, options.token, timeoutMs));
    } catch (err) {
      // A certificate refused either way, or one side without TLS: said as such, not as a dropped connection.
      throw asTlsError(err, `${address.host}:${address.port}`, options.tls !== undefined) ?? err;
    }
  }

  /** Accepts a socket on the server side and completes the handshake. */
  static accept(socket: net.Socket, options: ChannelOptions = {}): Promise<Channel> {
    const timeoutMs = options.timeoutMs ?? 10_000;
    return Channel.#start(socket, options, 'server', (connection, reader) => serverHandshake(connection, reader, options.token, timeoutMs));
  }

  static async #start(
    socket: net.Socket,
    options: ChannelOptions,
    side: HandshakeSide,
    handshake: (connection: Connection, reader: HandshakeReader) => Promise<void>,
  ): Promise<Channel> {
    const connection = new Connection(socket, { maxFrameBytes: options.maxFrameBytes ?? 64 * 1024 * 1024 });
    const reader = new HandshakeReader();
    // Each handshake step takes only the type it expects, refused on its 5-byte header: an
    // unauthenticated peer cannot make this side buffer a frame body of up to maxFrameBytes.
    connection.allowMessages(handshakeTypes(side, options.token, undefined));
    // Messages go to the handshake until the channel exists, then to the channel.
    // Messages read with the handshake's last one wait in `backlog` for a loop turn, so the
    // caller's handlers (registered after connect/accept resolves) see them, in order.
    const ready: { channel?: Channel; backlog?: Message[] } = {};
    connection.listen((event) => {
      if (event.kind !== 'message') throw new ProtocolError('value bytes on a control channel');
      if (ready.channel === undefined) {
        // Switched as the message is read: the next frame's header may be in this same chunk.
        connection.allowMessages(handshakeTypes(side, options.token, event.message.type));
        reader.push(event.message);
      }
      else if (ready.backlog !== undefined) ready.backlog.push(event.message);
      else ready.channel.#onMessage(event.message);
    });
    try {
      await handshake(connection, reader);
    } catch (err) {
      connection.fail(err instanceof Error ? err : new TransferError(errorMessage(err)));
      throw err;
    }
    const channel = new Channel(connection);
    ready.channel = channel;
    const early = reader.drain();
    if (early.length > 0) {
      ready.backlog = early;
      setImmediate(() => {
        const backlog = ready.backlog ?? [];
        ready.backlog = undefined;
        try {
          for (const message of backlog) if (!channel.#closed) channel.#onMessage(message);
        } catch (err) {
          connection.fail(err instanceof Error ? err : new ProtocolError(errorMessage(err)));
        }
      });
    }
    return channel;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The peer's IP address as this side sees it ('' once the socket is gone). */
  get remoteHost(): string {
    return this.#connection.socket.remoteAddress ?? '';
  }

  get remoteAddress(): string {
    const s = this.#connection.socket;
    return `${s.remoteAddress ?? '?'}:${s.remotePort ?? '?'}`;
  }

  /** Registers the handler of a method (requests and notifications alike). */
  handle(method: string, handler: Handler): this {
    this.#handlers.set(method, handler);
    return this;
  }

  /** Calls a method on the other side; rejects with its error (RemoteError) or when the channel closes. */
  request<T = unknown>(method: string, params?: unknown, timeoutMs?: number): Promise<T> {
    if (this.#closed) return Promise.reject(new ClosedError('channel'));
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              this.#pending.delete(id);
              reject(new TransferTimeoutError(`request ${method}`, timeoutMs));
            }, timeoutMs);
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
      this.#send(serializeRequest(id, packr().pack({ m: method, p: params })));
    });
  }

  /** Sends a one-way message; nothing comes back. Dropped if the channel is closed. */
  notify(method: string, params?: unknown): void {
    if (this.#closed) return;
    this.#send(serializeRequest(0, packr().pack({ m: method, p: params })));
  }

  close(err?: Error): void {
    if (err !== undefined) this.#connection.fail(err);
    else this.#connection.end();
  }

  #send(frame: Buffer): void {
    // Control messages are small; the socket buffers them. Backpressure matters on the data plane.
    this.#connection.write(frame).catch(() => undefined);
  }

  #onMessage(message: Message): void {
    switch (message.type) {
      case MessageType.Request:
        return this.#onRequest(message.requestId, message.body);
      case MessageType.Response: {
        const pending = this.#take(message.requestId);
        let result: unknown;
        try {
          result = unpackBody(message.body, 'Response');
        } catch (err) {
          // Taken off #pending already: rejected here, or it would wait forever.
          pending?.reject(err as Error);
          throw err;
        }
        pending?.resolve(result);
        return;
      }
      case MessageType.Error: {
        if (message.requestId === 0) {
          this.#connection.fail(new RemoteError(message.code, message.message));
          return;
        }
        this.#take(message.requestId)?.reject(new RemoteError(message.code, message.message));
        return;
      }
      default:
        throw new ProtocolError(`message type ${message.type} is not allowed on a control channel`);
    }
  }

  #take(id: number): Pending | undefined {
    const pending = this.#pending.get(id);
    if (pending === undefined) {
      // A request that timed out may still be answered: ignored. An id never sent is a bad frame.
      if (id > 0 && id < this.#nextId) return undefined;
      throw new ProtocolError(`answer to unknown request ${id}`);
    }
    this.#pending.delete(id);
    clearTimeout(pending.timer);
    return pending;
  }

  #onRequest(id: number, body: Uint8Array): void {
    const decoded = unpackBody(body, 'Request') as { m?: unknown; p?: unknown };
    if (typeof decoded !== 'object' || decoded === null || typeof decoded.m !== 'string') {
      throw new ProtocolError('a control request needs a method name');
    }
    const method = decoded.m;
    const handler = this.#handlers.get(method);
    if (handler === undefined) {
      if (id !== 0) this.#send(serializeError(id, 'SPW_ERR_UNKNOWN_METHOD', `unknown method ${method}`));
      else this.emit('unhandled', method, decoded.p);
      return;
    }
    Promise.resolve()
      .then(async () => {
        const result = await handler(decoded.p, this);
        // Packed here: a result msgpack cannot pack is the handler's error, not an unhandled rejection.
        if (id !== 0) this.#send(serializeResponse(id, packr().pack(result)));
      })
      .then(
        () => undefined,
        (err: unknown) => {
          if (id !== 0) {
            const code = err instanceof SpillwayError ? err.code : 'SPW_ERR_HANDLER';
            this.#send(serializeError(id, code, errorMessage(err)));
          } else {
            this.emit('handler-error', method, err);
          }
        },
      );
  }

  #onClose(err: Error | undefined): void {
    if (this.#closed) return;
    this.#closed = true;
    const reason = err ?? new TransferError('channel closed');
    for (const pending of this.#pending.values()) {
      clearTimeout(pending.timer);
      pending.reject(reason);
    }
    this.#pending.clear();
    this.emit('close', err);
  }
}

/** A frame's msgpack body; bytes that are not msgpack are the peer's fault: a ProtocolError. */
function unpackBody(body: Uint8Array, what: string): unknown {
  try {
    return packr().unpack(body);
  } catch (err) {
    throw new ProtocolError(`malformed ${what} body: ${errorMessage(err)}`);
  }
}

function openSocket(address: { host: string; port: number }, tlsOptions: tls.ConnectionOptions | undefined, timeoutMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket =
      tlsOptions === undefined
        ? net.connect(address.port, address.host)
        : tls.connect({ ...tlsOptions, host: address.host, port: address.port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new TransferTimeoutError(`connect to ${address.host}:${address.port}`, timeoutMs));
    }, timeoutMs);
    socket.once(tlsOptions === undefined ? 'connect' : 'secureConnect', () => {
      clearTimeout(timer);
      socket.removeAllListeners('error');
      resolve(socket);
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(new TransferError(`cannot connect to ${address.host}:${address.port}: ${err.message}`, { cause: err }));
    });
  });
}
