import { FRAME_HEADER_BYTES, HELLO_MAGIC, type Message, MessageType, NONCE_BYTES, PROOF_BYTES } from './messages.js';

/** Byte layouts of every message body; the parser mirrors these (docs/protocol.md#messages). */

function frame(type: MessageType, bodyLength: number): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + bodyLength);
  out.writeUInt8(type, 0);
  out.writeUInt32LE(bodyLength, 1);
  return out;
}

function fixed(type: MessageType, ...u32s: number[]): Buffer {
  const out = frame(type, 4 * u32s.length);
  u32s.forEach((v, i) => out.writeUInt32LE(v, FRAME_HEADER_BYTES + 4 * i));
  return out;
}

function bytesOf(bytes: Uint8Array, expected: number, what: string): Uint8Array {
  if (bytes.byteLength !== expected) throw new RangeError(`${what} must be ${expected} bytes`);
  return bytes;
}

export function serializeHello(version: number, nonce: Uint8Array): Buffer {
  const out = frame(MessageType.Hello, 6 + NONCE_BYTES);
  out.writeUInt32LE(HELLO_MAGIC, 5);
  out.writeUInt16LE(version, 9);
  out.set(bytesOf(nonce, NONCE_BYTES, 'nonce'), 11);
  return out;
}

export function serializeHelloOk(version: number, authRequired: boolean, nonce: Uint8Array, proof: Uint8Array): Buffer {
  const out = frame(MessageType.HelloOk, 3 + NONCE_BYTES + PROOF_BYTES);
  out.writeUInt16LE(version, 5);
  out.writeUInt8(authRequired ? 1 : 0, 7);
  out.set(bytesOf(nonce, NONCE_BYTES, 'nonce'), 8);
  out.set(bytesOf(proof, PROOF_BYTES, 'proof'), 8 + NONCE_BYTES);
  return out;
}

export function serializeAuth(proof: Uint8Array): Buffer {
  const out = frame(MessageType.Auth, PROOF_BYTES);
  out.set(bytesOf(proof, PROOF_BYTES, 'proof'), 5);
  return out;
}

export function serializeReady(): Buffer {
  return frame(MessageType.Ready, 0);
}

/** requestId u32, maxBytes u64, count u32, then count × (u32 length, utf-8 key). */
export function serializeGetData(requestId: number, maxBytes: number, keys: readonly string[]): Buffer {
  const encoded = keys.map((k) => Buffer.from(k, 'utf8'));
  const length = 16 + encoded.reduce((sum, k) => sum + 4 + k.byteLength, 0);
  const out = frame(MessageType.GetData, length);
  out.writeUInt32LE(requestId, 5);
  out.writeBigUInt64LE(BigInt(maxBytes), 9);
  out.writeUInt32LE(keys.length, 17);
  let offset = 21;
  for (const k of encoded) {
    out.writeUInt32LE(k.byteLength, offset);
    out.set(k, offset + 4);
    offset += 4 + k.byteLength;
  }
  return out;
}

/** The bytes a GetData for `keys` takes on the wire (to keep requests under maxFrameBytes). */
export function getDataBodyLength(keys: readonly string[]): number {
  return 16 + keys.reduce((sum, k) => sum + 4 + Buffer.byteLength(k, 'utf8'), 0);
}

/** requestId u32, index u32, byteLength u64; the value's raw bytes follow the frame. */
export function serializeValue(requestId: number, index: number, byteLength: number): Buffer {
  const out = frame(MessageType.Value, 16);
  out.writeUInt32LE(requestId, 5);
  out.writeUInt32LE(index, 9);
  out.writeBigUInt64LE(BigInt(byteLength), 13);
  return out;
}

export function serializeMissing(requestId: number, index: number): Buffer {
  return fixed(MessageType.Missing, requestId, index);
}

export function serializeDataDone(requestId: number, answered: number): Buffer {
  return fixed(MessageType.DataDone, requestId, answered);
}

export function serializeBusy(requestId: number, retryAfterMs: number): Buffer {
  return fixed(MessageType.Busy, requestId, retryAfterMs);
}

function withBody(type: MessageType, requestId: number, body: Uint8Array): Buffer {
  const out = frame(type, 4 + body.byteLength);
  out.writeUInt32LE(requestId, 5);
  out.set(body, 9);
  return out;
}

export function serializeRequest(requestId: number, body: Uint8Array): Buffer {
  return withBody(MessageType.Request, requestId, body);
}

/**
 * The frame of a RequestBytes up to its payload: requestId u32, body length u32, msgpack
 * body. The caller writes the `payloadBytes` raw bytes right after it.
 */
export function serializeRequestBytesHead(requestId: number, body: Uint8Array, payloadBytes: number): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 8 + body.byteLength);
  out.writeUInt8(MessageType.RequestBytes, 0);
  out.writeUInt32LE(8 + body.byteLength + payloadBytes, 1);
  out.writeUInt32LE(requestId, 5);
  out.writeUInt32LE(body.byteLength, 9);
  out.set(body, 13);
  return out;
}

export function serializeResponse(requestId: number, body: Uint8Array): Buffer {
  return withBody(MessageType.Response, requestId, body);
}

/** requestId u32, code (u16 length, utf-8), message (u32 length, utf-8). */
export function serializeError(requestId: number, code: string, message: string): Buffer {
  const c = Buffer.from(code.slice(0, 200), 'utf8');
  const m = Buffer.from(message.slice(0, 4000), 'utf8');
  const out = frame(MessageType.Error, 10 + c.byteLength + m.byteLength);
  out.writeUInt32LE(requestId, 5);
  out.writeUInt16LE(c.byteLength, 9);
  out.set(c, 11);
  out.writeUInt32LE(m.byteLength, 11 + c.byteLength);
  out.set(m, 15 + c.byteLength);
  return out;
}

/** Any message, for tests and tools; hot paths call the specific functions. */
export function serialize(message: Message): Buffer {
  switch (message.type) {
    case MessageType.Hello:
      return serializeHello(message.version, message.nonce);
    case MessageType.HelloOk:
      return serializeHelloOk(message.version, message.authRequired, message.nonce, message.proof);
    case MessageType.Auth:
      return serializeAuth(message.proof);
    case MessageType.Ready:
      return serializeReady();
    case MessageType.GetData:
      return serializeGetData(message.requestId, message.maxBytes, message.keys);
    case MessageType.Value:
      return serializeValue(message.requestId, message.index, message.byteLength);
    case MessageType.Missing:
      return serializeMissing(message.requestId, message.index);
    case MessageType.DataDone:
      return serializeDataDone(message.requestId, message.answered);
    case MessageType.Busy:
      return serializeBusy(message.requestId, message.retryAfterMs);
    case MessageType.Request:
      return serializeRequest(message.requestId, message.body);
    case MessageType.Response:
      return serializeResponse(message.requestId, message.body);
    case MessageType.RequestBytes: {
      const payload = Buffer.concat(message.payload);
      return Buffer.concat([serializeRequestBytesHead(message.requestId, message.body, payload.byteLength), payload]);
    }
    case MessageType.Error:
      return serializeError(message.requestId, message.code, message.message);
  }
}
