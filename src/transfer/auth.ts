import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { NONCE_BYTES, PROOF_BYTES } from './messages.js';

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
