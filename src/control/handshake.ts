import { answerHelloOk, clientProof, newNonce, proofMatches, serverProof, ZERO_PROOF } from '../transfer/auth.js';
import type { Connection } from '../transfer/connection.js';
import { AuthError, ProtocolError, ProtocolVersionError, TransferTimeoutError } from '../transfer/errors.js';
import { type Message, MessageType, PROTOCOL_VERSION, SERVER_AUTH_TYPES, SERVER_HELLO_TYPES } from '../transfer/messages.js';
import { serializeAuth, serializeError, serializeHello, serializeHelloOk, serializeReady } from '../transfer/serializer.js';

/**
 * The control plane opens with the same handshake as the data plane (docs/protocol.md):
 * version, then mutual HMAC proof of the shared token. Nothing else is accepted before it.
 */
export class HandshakeReader {
  private readonly queue: Message[] = [];
  private waiting: ((message: Message) => void) | undefined;

  push(message: Message): void {
    if (this.waiting !== undefined) {
      const resolve = this.waiting;
      this.waiting = undefined;
      resolve(message);
    } else if (this.queue.push(message) > 8) {
      throw new ProtocolError('too many messages before the handshake finished');
    }
  }

  /** Takes the messages that came after the handshake's last one (in the same read). */
  drain(): Message[] {
    return this.queue.splice(0);
  }

  next(connection: Connection, timeoutMs: number): Promise<Message> {
    const queued = this.queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new TransferTimeoutError('handshake', timeoutMs)), timeoutMs);
      const off = connection.onClose((err) => {
        clearTimeout(timer);
        reject(err ?? new ProtocolError('connection closed during the handshake'));
      });
      this.waiting = (message) => {
        clearTimeout(timer);
        off();
        resolve(message);
      };
    });
  }
}

export type HandshakeSide = 'client' | 'server';

const CHANNEL_TYPES: ReadonlySet<number> = new Set([MessageType.Request, MessageType.Response, MessageType.Error]);
const CLIENT_FIRST: ReadonlySet<number> = new Set([MessageType.HelloOk, MessageType.Error]);
const CLIENT_READY: ReadonlySet<number> = new Set([MessageType.Ready, MessageType.Error]);

/**
 * The message types one side takes next, given the last handshake message it read
 * (undefined: none yet). The server takes Hello, then Auth when it has a token; the client
 * HelloOk, then Ready (or Error either time); after that, only channel messages.
 */
export function handshakeTypes(side: HandshakeSide, token: string | undefined, last: MessageType | undefined): ReadonlySet<number> {
  if (side === 'server') {
    if (last === undefined) return SERVER_HELLO_TYPES;
    return last === MessageType.Hello && token !== undefined ? SERVER_AUTH_TYPES : CHANNEL_TYPES;
  }
  if (last === undefined) return CLIENT_FIRST;
  return last === MessageType.HelloOk ? CLIENT_READY : CHANNEL_TYPES;
}

export async function clientHandshake(connection: Connection, reader: HandshakeReader, token: string | undefined, timeoutMs: number): Promise<void> {
  const nonce = newNonce();
  await connection.write(serializeHello(PROTOCOL_VERSION, nonce));
  const hello = await reader.next(connection, timeoutMs);
  const proof = answerHelloOk(hello, token, nonce);
  if (proof !== undefined) await connection.write(serializeAuth(proof));
  const ready = await reader.next(connection, timeoutMs);
  if (ready.type === MessageType.Error) throw new AuthError(`server refused: ${ready.message}`);
  if (ready.type !== MessageType.Ready) throw new ProtocolError(`expected Ready, got message ${ready.type}`);
}

export async function serverHandshake(connection: Connection, reader: HandshakeReader, token: string | undefined, timeoutMs: number): Promise<void> {
  const hello = await reader.next(connection, timeoutMs);
  if (hello.type !== MessageType.Hello) throw new ProtocolError(`expected Hello, got message ${hello.type}`);
  if (hello.version !== PROTOCOL_VERSION) {
    connection.end(serializeError(0, 'SPW_ERR_PROTOCOL_VERSION', `version ${hello.version} is not supported`));
    throw new ProtocolVersionError(hello.version, PROTOCOL_VERSION);
  }
  const nonce = newNonce();
  if (token === undefined) {
    await connection.write(serializeHelloOk(PROTOCOL_VERSION, false, nonce, ZERO_PROOF));
    await connection.write(serializeReady());
    return;
  }
  await connection.write(serializeHelloOk(PROTOCOL_VERSION, true, nonce, serverProof(token, hello.nonce, nonce)));
  const auth = await reader.next(connection, timeoutMs);
  if (auth.type !== MessageType.Auth || !proofMatches(clientProof(token, hello.nonce, nonce), auth.proof)) {
    connection.end(serializeError(0, 'SPW_ERR_AUTH', 'wrong token'));
    throw new AuthError('client failed authentication: wrong token');
  }
  await connection.write(serializeReady());
}
