import net from 'node:net';
import tls from 'node:tls';
import { msgpackr } from '../codec/msgpackr.js';
import { errorMessage } from '../errors.js';
import { answerHelloOk, newNonce } from './auth.js';
import { Connection } from './connection.js';
import {
  AuthError,
  ProtocolError,
  ProtocolVersionError,
  RemoteError,
  TransferError,
  TransferTimeoutError,
} from './errors.js';
import { type ErrorMessage, type Message, MessageType, type ParsedEvent, PROTOCOL_VERSION } from './messages.js';
import type { ParserOptions } from './parser.js';
import { GetDataReceiver, type GetDataOutcome } from './receiver.js';
import { serializeAuth, serializeGetData, serializeHello, serializeRequest, serializeRequestBytesHead } from './serializer.js';

export interface PeerAddress {
  host: string;
  port: number;
}

export interface ConnectOptions extends ParserOptions {
  token?: string;
  tls?: tls.ConnectionOptions;
  /** Deadline for connecting and completing the handshake: a frozen peer still accepts connections. */
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  /** Aborting fails the connection (or its opening) with a TransferError. */
  signal?: AbortSignal;
}

/** Whatever is waiting for the server's next messages. */
interface Waiter {
  onEvent(event: ParsedEvent): void;
  onClose(err: Error): void;
}

/** The typed error for a connection-level Error message from the server. */
export function remoteFailure(message: ErrorMessage): Error {
  switch (message.code) {
    case 'SPW_ERR_AUTH':
      return new AuthError(`server refused: ${message.message}`);
    case 'SPW_ERR_PROTOCOL':
      return new ProtocolError(`server reported: ${message.message}`);
    case 'SPW_ERR_PROTOCOL_VERSION':
      return new ProtocolVersionError(PROTOCOL_VERSION, -1);
    default:
      return new RemoteError(message.code, message.message);
  }
}

/**
 * The client's end of one connection: connect, handshake (version, then mutual HMAC
 * authentication when a token is set), then one request at a time.
 */
export class ClientConnection {
  private waiter: Waiter | undefined;
  /** Events that arrived between waiters (e.g. Ready in the same chunk as HelloOk). */
  private readonly inbox: ParsedEvent[] = [];
  private nextRequestId = 1;

  private constructor(readonly connection: Connection) {
    connection.listen(
      (event) => {
        if (event.kind === 'message' && event.message.type === MessageType.Error && event.message.requestId === 0) {
          connection.fail(remoteFailure(event.message));
          return;
        }
        if (this.waiter !== undefined) this.waiter.onEvent(event);
        else if (this.inbox.push(event) > 16) throw new ProtocolError('the server sent messages nobody asked for');
      },
      (err) => connection.fail(err),
    );
    connection.onClose((err) => this.waiter?.onClose(err ?? new TransferError('connection closed by the server')));
  }

  static async open(address: PeerAddress, options: ConnectOptions): Promise<ClientConnection> {
    const started = performance.now();
    const socket = await connect(address, options);
    const client = new ClientConnection(
      new Connection(socket, { ...options, idleTimeoutMs: options.idleTimeoutMs }),
    );
    const { signal } = options;
    if (signal !== undefined) {
      const abort = (): void => client.connection.fail(abortedError(address, signal));
      signal.addEventListener('abort', abort, { once: true });
      client.connection.onClose(() => signal.removeEventListener('abort', abort));
      if (signal.aborted) abort();
    }
    // The TCP connect and the handshake share one deadline: the kernel of a stopped peer
    // still completes the connect, and only the handshake shows that nobody answers.
    const remaining = Math.max(1, options.connectTimeoutMs - (performance.now() - started));
    const deadline = setTimeout(() => {
      client.connection.fail(new TransferTimeoutError(`connecting to ${address.host}:${address.port} (handshake)`, options.connectTimeoutMs));
    }, remaining);
    try {
      await client.handshake(options.token);
    } catch (err) {
      client.close();
      throw err;
    } finally {
      clearTimeout(deadline);
    }
    return client;
  }

  private async handshake(token: string | undefined): Promise<void> {
    const nonce = newNonce();
    const hello = await this.exchange(serializeHello(PROTOCOL_VERSION, nonce));
    const proof = answerHelloOk(hello, token, nonce);
    const ready = proof === undefined ? await this.exchange() : await this.exchange(serializeAuth(proof));
    if (ready.type !== MessageType.Ready) throw new ProtocolError(`expected Ready, got message ${ready.type}`);
  }

  /** Sends `frame` (if any) and waits for the next message. */
  private exchange(frame?: Buffer): Promise<Message> {
    return this.wait<Message>((event, resolve) => {
      if (event.kind !== 'message') throw new ProtocolError('value bytes during the handshake');
      resolve(event.message);
    }, frame);
  }

  private wait<T>(
    onEvent: (event: ParsedEvent, resolve: (value: T) => void, reject: (err: Error) => void) => void,
    frame?: Buffer | readonly Uint8Array[],
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const done = (value: T): void => {
        this.waiter = undefined;
        resolve(value);
      };
      const failed = (err: Error): void => {
        this.waiter = undefined;
        reject(err);
      };
      this.waiter = {
        onEvent: (event) => onEvent(event, done, failed),
        onClose: (err) => {
          this.waiter = undefined;
          reject(err);
        },
      };
      if (this.connection.closed) {
        this.waiter.onClose(this.connection.error ?? new TransferError('connection closed'));
        return;
      }
      const waiter = this.waiter;
      if (frame !== undefined) (Array.isArray(frame) ? this.connection.writeAll(frame) : this.connection.write(frame as Buffer)).catch(() => undefined);
      try {
        while (this.waiter === waiter && this.inbox.length > 0) waiter.onEvent(this.inbox.shift() as ParsedEvent);
      } catch (err) {
        this.connection.fail(err instanceof Error ? err : new ProtocolError(String(err)));
      }
    });
  }

  newRequestId(): number {
    const id = this.nextRequestId;
    this.nextRequestId = id >= 0xffffffff ? 1 : id + 1;
    return id;
  }

  /** Sends one GetData and feeds its answer to `receiver` until DataDone or Busy. */
  getData(receiver: GetDataReceiver, keys: readonly string[], maxBytes: number): Promise<GetDataOutcome> {
    const promise = this.wait<GetDataOutcome>((event, resolve) => {
      const outcome = receiver.onEvent(event);
      if (outcome !== undefined) resolve(outcome);
    }, serializeGetData(receiver.requestId, maxBytes, keys));
    return promise.catch((err: unknown) => {
      receiver.abort(err instanceof Error ? err : new TransferError(String(err)));
      throw err;
    });
  }

  /**
   * A generic msgpack request; resolves with the decoded response body. With `payload`, a
   * RequestBytes: the bytes follow the body on the wire as they are, never copied here.
   */
  request(body: unknown, payload?: Uint8Array): Promise<unknown> {
    const requestId = this.newRequestId();
    const packed = msgpackr().pack(body);
    const frame = payload === undefined ? serializeRequest(requestId, packed) : [serializeRequestBytesHead(requestId, packed, payload.byteLength), payload];
    return this.wait<unknown>((event, resolve, reject) => {
      const message = event.kind === 'message' ? event.message : undefined;
      if (message?.type === MessageType.Response && message.requestId === requestId) resolve(unpackResponse(message.body));
      else if (message?.type === MessageType.Error && message.requestId === requestId) reject(new RemoteError(message.code, message.message));
      else throw new ProtocolError('unexpected answer to a request');
    }, frame);
  }

  fail(err: Error): void {
    this.connection.fail(err);
  }

  close(): void {
    this.connection.end();
    // The server closes its side in turn; do not wait for it.
    this.connection.socket.unref();
  }
}

/** A Response's msgpack body; bytes that are not msgpack are the server's fault: a ProtocolError. */
function unpackResponse(body: Uint8Array): unknown {
  try {
    return msgpackr().unpack(body);
  } catch (err) {
    throw new ProtocolError(`malformed Response body: ${errorMessage(err)}`);
  }
}

function connect(address: PeerAddress, options: ConnectOptions): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket =
      options.tls !== undefined
        ? tls.connect({ ...options.tls, host: address.host, port: address.port })
        : net.connect({ host: address.host, port: address.port });
    const { signal } = options;
    const onAbort = (): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(abortedError(address, signal as AbortSignal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      reject(new TransferTimeoutError(`connecting to ${address.host}:${address.port}`, options.connectTimeoutMs));
    }, options.connectTimeoutMs);
    if (signal?.aborted === true) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    const onError = (err: Error): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      reject(
        err.message.includes('certificate') || err.name.includes('TLS')
          ? new AuthError(`TLS handshake with ${address.host}:${address.port} failed: ${err.message}`)
          : new TransferError(`cannot connect to ${address.host}:${address.port}: ${err.message}`, { cause: err }),
      );
    };
    socket.once('error', onError);
    socket.once(options.tls !== undefined ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      socket.off('error', onError);
      resolve(socket);
    });
  });
}

function abortedError(address: PeerAddress, signal: AbortSignal): TransferError {
  const reason: unknown = signal.reason;
  const why = reason instanceof Error ? reason.message : typeof reason === 'string' ? reason : 'aborted';
  return new TransferError(`connection to ${address.host}:${address.port} abandoned: ${why}`, { cause: reason });
}
