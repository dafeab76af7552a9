import type { EventEmitter } from 'node:events';
import { msgpackr } from '../codec/msgpackr.js';
import { KeyNotFoundError, SpillwayError, errorMessage } from '../errors.js';
import { recycleChunk } from '../tiers/tier.js';
import { clientProof, newNonce, proofMatches, serverProof, ZERO_PROOF } from './auth.js';
import { Connection } from './connection.js';
import { AuthError, ProtocolError, ProtocolVersionError, TransferError, TransferTimeoutError } from './errors.js';
import type { ByteBudget, RequestSlots } from './limits.js';
import { type GetDataMessage, type Message, MESSAGE_NAMES, MessageType, PROTOCOL_VERSION, type RequestBytesMessage, type RequestMessage, SERVER_AUTH_TYPES, SERVER_HELLO_TYPES } from './messages.js';
import {
  serializeBusy,
  serializeDataDone,
  serializeError,
  serializeHelloOk,
  serializeMissing,
  serializeReady,
  serializeResponse,
  serializeValue,
} from './serializer.js';
import type { EncodedSource, ServingStore } from './store-like.js';

/** The server's settings each of its sessions follows. */
export interface SessionSettings {
  readonly token: string | undefined;
  readonly handshakeTimeoutMs: number;
  readonly maxPipelined: number;
  readonly busyRetryAfterMs: number;
  readonly onRequest: ((body: unknown, payload?: readonly Uint8Array[]) => unknown) | undefined;
}

/** What the sessions of one server share. */
export interface ServerShared {
  readonly store: ServingStore;
  readonly settings: SessionSettings;
  /** Bytes of values being sent at once. */
  readonly budget: ByteBudget;
  /** Requests served at once. */
  readonly slots: RequestSlots;
  readonly counters: ServerCounters;
  readonly errors: ConnectionErrors;
}

/** Where a server's failed connections are announced: its 'connection-error' event, when anyone listens. */
export class ConnectionErrors {
  constructor(private readonly server: EventEmitter) {}

  report(err: Error): void {
    if (this.server.listenerCount('connection-error') > 0) this.server.emit('connection-error', err);
  }
}

export interface ServerCounters {
  requests: number;
  busyReplies: number;
  valuesServed: number;
  missingReplies: number;
  servedFromDiskBytes: number;
  servedFromMemoryBytes: number;
  authFailures: number;
  protocolErrors: number;
  aborted: number;
}

type State = 'hello' | 'auth' | 'ready' | 'closing';

/**
 * Largest piece handed to the socket at once. The stall timeout runs while a write waits for
 * 'drain', which comes only once the whole piece has left: a large piece can take longer
 * than idleTimeoutMs to reach a peer reading steadily but slowly, which would then be
 * closed as "not reading". At 256 KiB a piece leaves in a few of a slow reader's reads,
 * even on a loaded host.
 */
const SEND_SLICE_BYTES = 256 * 1024;

/** What a client may send once Ready (before it: SERVER_HELLO_TYPES, then SERVER_AUTH_TYPES). */
const READY_TYPES: ReadonlySet<number> = new Set([MessageType.GetData, MessageType.Request, MessageType.RequestBytes]);

/**
 * One client connection on the server: handshake, then requests answered strictly in
 * order (a value's raw bytes cannot be interleaved with anything), each value streamed
 * from the store's encoded-bytes reader with socket backpressure.
 */
export class ServerSession {
  private state: State = 'hello';
  private readonly nonce = newNonce();
  private clientNonce: Uint8Array = ZERO_PROOF;
  private queue: Promise<void> = Promise.resolve();
  private pipelined = 0;
  private readonly handshakeTimer: NodeJS.Timeout;

  constructor(
    readonly connection: Connection,
    private readonly server: ServerShared,
  ) {
    connection.listen((event) => {
      if (event.kind !== 'message') {
        // Only a server sends raw value bytes.
        this.fatal(new ProtocolError('unexpected value bytes from a client'));
        return;
      }
      this.onMessage(event.message);
    }, (err) => this.fatal(err));
    connection.allowMessages(SERVER_HELLO_TYPES);
    this.handshakeTimer = setTimeout(() => {
      if (this.state === 'hello' || this.state === 'auth') {
        this.fatal(new TransferTimeoutError('handshake', server.settings.handshakeTimeoutMs));
      }
    }, server.settings.handshakeTimeoutMs);
    this.handshakeTimer.unref();
    connection.onClose((err) => {
      clearTimeout(this.handshakeTimer);
      if (err !== undefined) {
        if (err instanceof ProtocolError || (err instanceof SpillwayError && err.code === 'SPW_ERR_FRAME_TOO_LARGE')) {
          server.counters.protocolErrors++;
        }
        server.errors.report(err);
      }
    });
  }

  private onMessage(message: Message): void {
    switch (this.state) {
      case 'hello':
        if (message.type !== MessageType.Hello) return this.unexpected(message);
        return this.onHello(message.version, message.nonce);
      case 'auth':
        if (message.type !== MessageType.Auth) return this.unexpected(message);
        return this.onAuth(message.proof);
      case 'ready':
        if (message.type === MessageType.GetData) return this.enqueue(message, () => this.serveGetData(message));
        if (message.type === MessageType.Request || message.type === MessageType.RequestBytes) return this.enqueue(message, () => this.serveRequest(message));
        return this.unexpected(message);
      case 'closing':
        return;
    }
  }

  private unexpected(message: Message): void {
    this.fatal(new ProtocolError(`unexpected ${MESSAGE_NAMES[message.type]} message in state ${this.state}`));
  }

  /** Tells the peer why (best effort), then closes this connection only. */
  private fatal(err: Error): void {
    if (this.state === 'closing') return;
    this.state = 'closing';
    this.connection.recordError(err);
    const code = err instanceof SpillwayError ? err.code : 'SPW_ERR_INTERNAL';
    const socket = this.connection.socket;
    if (!socket.destroyed && socket.writable && !socket.writableNeedDrain) {
      socket.end(serializeError(0, code, err.message));
      // A peer that never reads must not keep the socket open.
      setTimeout(() => this.connection.fail(err), 1000).unref();
    } else {
      this.connection.fail(err);
    }
  }

  private onHello(version: number, nonce: Uint8Array): void {
    if (version !== PROTOCOL_VERSION) return this.fatal(new ProtocolVersionError(version, PROTOCOL_VERSION));
    this.clientNonce = nonce;
    const token = this.server.settings.token;
    if (token === undefined) {
      this.connection.socket.write(serializeHelloOk(PROTOCOL_VERSION, false, this.nonce, ZERO_PROOF));
      this.connection.socket.write(serializeReady());
      this.becomeReady();
      return;
    }
    this.state = 'auth';
    this.connection.allowMessages(SERVER_AUTH_TYPES);
    const proof = serverProof(token, nonce, this.nonce);
    this.connection.socket.write(serializeHelloOk(PROTOCOL_VERSION, true, this.nonce, proof));
  }

  private onAuth(proof: Uint8Array): void {
    const token = this.server.settings.token ?? '';
    if (!proofMatches(clientProof(token, this.clientNonce, this.nonce), proof)) {
      this.server.counters.authFailures++;
      return this.fatal(new AuthError('client failed authentication: wrong token'));
    }
    this.connection.socket.write(serializeReady());
    this.becomeReady();
  }

  private becomeReady(): void {
    this.state = 'ready';
    this.connection.allowMessages(READY_TYPES);
    clearTimeout(this.handshakeTimer);
  }

  /** Busy is decided on arrival, so a saturated server answers quickly. */
  private enqueue(message: GetDataMessage | RequestMessage | RequestBytesMessage, serve: () => Promise<void>): void {
    if (++this.pipelined > this.server.settings.maxPipelined) {
      return this.fatal(new ProtocolError(`more than ${this.server.settings.maxPipelined} requests pipelined on one connection`));
    }
    let run = serve;
    if (message.type === MessageType.GetData) {
      if (this.server.slots.tryStart()) {
        this.server.counters.requests++;
        run = () => serve().finally(() => this.server.slots.end());
      } else {
        this.server.counters.busyReplies++;
        run = () => this.connection.write(serializeBusy(message.requestId, this.server.settings.busyRetryAfterMs));
      }
    }
    this.queue = this.queue
      .then(run)
      .catch((err: unknown) => this.fatal(err instanceof Error ? err : new TransferError(errorMessage(err))))
      .finally(() => this.pipelined--);
  }

  private async serveGetData(message: GetDataMessage): Promise<void> {
    const { requestId, keys } = message;
    let answered = 0;
    let sentBytes = 0;
    for (let index = 0; index < keys.length; index++) {
      if (this.state === 'closing') return;
      let source: EncodedSource;
      try {
        source = this.server.store.createReadStream(keys[index]);
      } catch (err) {
        if (!(err instanceof KeyNotFoundError)) throw err;
        this.server.counters.missingReplies++;
        await this.connection.write(serializeMissing(requestId, index));
        answered++;
        continue;
      }
      // Always answer at least one value, so a value above the budget still moves.
      if (sentBytes > 0 && sentBytes + source.byteLength > message.maxBytes) {
        source.destroy();
        break;
      }
      await this.sendValue(requestId, index, source);
      answered++;
      sentBytes += source.byteLength;
    }
    await this.connection.write(serializeDataDone(requestId, answered));
  }

  /** Streams one value; a failure after its header breaks framing, so it closes the connection. */
  private async sendValue(requestId: number, index: number, source: EncodedSource): Promise<void> {
    const connection = this.connection;
    // Waiting for room is this server's doing: the peer is not idle meanwhile.
    const release = connection.holdIdle();
    let held: number;
    try {
      held = await this.server.budget.acquire(source.byteLength);
    } finally {
      release();
    }
    let sent = 0;
    try {
      const socket = connection.socket;
      // Cork so the header and the first piece leave in one writev.
      socket.cork();
      let corked = true;
      socket.write(serializeValue(requestId, index, source.byteLength));
      for await (const chunk of source as AsyncIterable<Uint8Array>) {
        sent += chunk.byteLength;
        if (sent > source.byteLength) throw new TransferError(`value grew past its declared ${source.byteLength} bytes`);
        for (let at = 0; at < chunk.byteLength || at === 0; at += SEND_SLICE_BYTES) {
          const end = Math.min(at + SEND_SLICE_BYTES, chunk.byteLength);
          const piece = at === 0 && end === chunk.byteLength ? chunk : chunk.subarray(at, end);
          // Once the socket has written its last piece, the chunk's memory can be read into again.
          const more = end === chunk.byteLength ? socket.write(piece, () => recycleChunk(source, chunk)) : socket.write(piece);
          if (corked) {
            socket.uncork();
            corked = false;
          }
          if (!more) await connection.drained();
          if (end === chunk.byteLength) break;
        }
      }
      if (corked) socket.uncork();
      if (sent !== source.byteLength) {
        throw new TransferError(`value stream ended at ${sent} of ${source.byteLength} bytes`);
      }
      this.server.counters.valuesServed++;
    } catch (err) {
      this.server.counters.aborted++;
      source.destroy();
      // The peer is owed raw bytes we cannot send: only closing keeps framing honest.
      connection.fail(err instanceof Error ? err : new TransferError(errorMessage(err)));
      this.state = 'closing';
      throw err;
    } finally {
      if (source.source === 'memory') this.server.counters.servedFromMemoryBytes += sent;
      else this.server.counters.servedFromDiskBytes += sent;
      this.server.budget.release(held);
    }
  }

  private async serveRequest(message: RequestMessage | RequestBytesMessage): Promise<void> {
    const handler = this.server.settings.onRequest;
    let reply: Buffer;
    try {
      if (handler === undefined) throw new ProtocolError('this server takes no generic requests');
      const body: unknown = msgpackr().unpack(message.body);
      const result = await (message.type === MessageType.RequestBytes ? handler(body, message.payload) : handler(body));
      reply = serializeResponse(message.requestId, msgpackr().pack(result));
    } catch (err) {
      const code = err instanceof SpillwayError ? err.code : 'SPW_ERR_HANDLER';
      reply = serializeError(message.requestId, code, errorMessage(err));
    }
    await this.connection.write(reply);
  }
}
