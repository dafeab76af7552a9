import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { AuthError, ProtocolError, ProtocolVersionError } from './errors.js';
import { type Message, MessageType, NONCE_BYTES, PROOF_BYTES, PROTOCOL_VERSION } from './messages.js';

/**
 * HMAC-SHA256 challenge-response (docs/protocol.md#handshake). Each side proves it holds
 * the token over both nonces; the labels differ so a proof cannot be reflected back.
 */
const SERVER_LABEL = Buffer.from('spillway-transfer server v1\0');
const CLIENT_LABEL = Buffer.from('spillway-transfer client v1\0');

export const ZERO_PROOF = new Uint8Array(PROOF_BYTES);

export function newNonce(): Uint8Array {
  return randomBytes(NONCE_BYTES);
}

function proof(label: Buffer, token: string, clientNonce: Uint8Array, serverNonce: Uint8Array): Uint8Array {
  return createHmac('sha256', token).update(label).update(clientNonce).update(serverNonce).digest();
}

export function serverProof(token: string, clientNonce: Uint8Array, serverNonce: Uint8Array): Uint8Array {
  return proof(SERVER_LABEL, token, clientNonce, serverNonce);
}

export function clientProof(token: string, clientNonce: Uint8Array, serverNonce: Uint8Array): Uint8Array {
  return proof(CLIENT_LABEL, token, clientNonce, serverNonce);
}

/** Constant-time comparison; lengths are fixed by the protocol. */
export function proofMatches(expected: Uint8Array, actual: Uint8Array): boolean {
  return expected.byteLength === actual.byteLength && timingSafeEqual(expected, actual);
}

/**
 * The client's check of the server's answer to Hello (data and control planes alike):
 * right message and version, and the server proves it holds the token before the client
 * proves anything. Returns the client's proof to send, or undefined without a token.
 */
export function answerHelloOk(hello: Message, token: string | undefined, nonce: Uint8Array): Uint8Array | undefined {
  if (hello.type === MessageType.Error) throw new AuthError(`server refused: ${hello.message}`);
  if (hello.type !== MessageType.HelloOk) throw new ProtocolError(`expected HelloOk, got message ${hello.type}`);
  if (hello.version !== PROTOCOL_VERSION) throw new ProtocolVersionError(hello.version, PROTOCOL_VERSION);
  if (token === undefined) {
    if (hello.authRequired) throw new AuthError('the server requires a token and none was given');
    return undefined;
  }
  // Mutual: a server that cannot prove it holds the token gets nothing, not even our proof.
  if (!hello.authRequired) throw new AuthError('the server does not authenticate (it has no token)');
  if (!proofMatches(serverProof(token, nonce, hello.nonce), hello.proof)) throw new AuthError('the server failed authentication: wrong token');
  return clientProof(token, nonce, hello.nonce);
}
