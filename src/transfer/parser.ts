import { byteOption } from '../units.js';
import { FrameTooLargeError, ProtocolError, TransferError } from './errors.js';
import {
  FRAME_HEADER_BYTES,
  HELLO_MAGIC,
  type Message,
  MESSAGE_NAMES,
  MessageType,
  NONCE_BYTES,
  type ParsedEvent,
  PROOF_BYTES,
} from './messages.js';

export interface ParserOptions {
  /** Largest frame body accepted (control messages, key lists). Default 16 MiB. */
  maxFrameBytes?: number | string;
  /** Largest value accepted after a Value frame. Default 64 GiB. */
  maxValueBytes?: number | string;
}

export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;
export const DEFAULT_MAX_VALUE_BYTES = 64 * 1024 * 1024 * 1024;

/** Exact body length of fixed-size messages; checked on the header, before buffering anything. */
const FIXED_LENGTH: Readonly<Record<number, number>> = {
  [MessageType.Hello]: 6 + NONCE_BYTES,
  [MessageType.HelloOk]: 3 + NONCE_BYTES + PROOF_BYTES,
  [MessageType.Auth]: PROOF_BYTES,
  [MessageType.Ready]: 0,
  [MessageType.Value]: 16,
  [MessageType.Missing]: 8,
  [MessageType.DataDone]: 8,
  [MessageType.Busy]: 8,
};
const MIN_LENGTH: Readonly<Record<number, number>> = {
  [MessageType.GetData]: 16,
  [MessageType.Request]: 4,
  [MessageType.Response]: 4,
  [MessageType.RequestBytes]: 8,
  [MessageType.Error]: 10,
};

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Incremental parser over socket chunks (in the manner of pg-protocol). Frames may be
 * split anywhere; a frame body is buffered only as its bytes arrive (never allocated from
 * the declared length), and a value's raw bytes are passed on as views of the chunks they
 * arrived in. After any error the parser is dead: the connection must be closed.
 */
export class Parser {
  private readonly maxFrameBytes: number;
  private readonly maxValueBytes: number;
  private readonly header = Buffer.alloc(FRAME_HEADER_BYTES);
  private headerFilled = 0;
  private type = 0;
  private bodyLength = -1;
  private bodyParts: Buffer[] = [];
  private bodyFilled = 0;
  private rawRemaining = 0;
  private failure: Error | undefined;
  /** Message types the owner accepts next; others are refused on their header, before any body byte is kept. */
  private allowed: ReadonlySet<number> | undefined;

  constructor(options: ParserOptions = {}) {
    this.maxFrameBytes = byteOption(options.maxFrameBytes, 'maxFrameBytes') ?? DEFAULT_MAX_FRAME_BYTES;
    this.maxValueBytes = byteOption(options.maxValueBytes, 'maxValueBytes') ?? DEFAULT_MAX_VALUE_BYTES;
  }

  /** Accept only these message types from now on (undefined: any); checked on each frame's header. */
  allow(types: ReadonlySet<number> | undefined): void {
    this.allowed = types;
  }

  /** True between frames: a clean place for the stream to end. */
  get idle(): boolean {
    return this.headerFilled === 0 && this.rawRemaining === 0 && this.failure === undefined;
  }

  parse(chunk: Buffer, emit: (event: ParsedEvent) => void): void {
    if (this.failure !== undefined) throw this.failure;
    try {
      this.parseChunk(chunk, emit);
    } catch (err) {
      this.failure = err instanceof Error ? err : new ProtocolError(String(err));
      throw err;
    }
  }

  /** The stream ended: throws TransferError if it stopped inside a frame or a value. */
  end(): void {
    if (this.failure !== undefined) return;
    if (this.rawRemaining > 0) {
      throw (this.failure = new TransferError(`stream truncated: ${this.rawRemaining} bytes of a value missing`));
    }
    if (this.headerFilled > 0) {
      throw (this.failure = new TransferError('stream truncated inside a frame'));
    }
  }

  private parseChunk(chunk: Buffer, emit: (event: ParsedEvent) => void): void {
    let offset = 0;
    while (offset < chunk.byteLength) {
      if (this.rawRemaining > 0) {
        const take = Math.min(this.rawRemaining, chunk.byteLength - offset);
        this.rawRemaining -= take;
        emit({ kind: 'value-chunk', bytes: chunk.subarray(offset, offset + take) });
        offset += take;
        if (this.rawRemaining === 0) emit({ kind: 'value-end' });
        continue;
      }
      if (this.headerFilled < FRAME_HEADER_BYTES) {
        const take = Math.min(FRAME_HEADER_BYTES - this.headerFilled, chunk.byteLength - offset);
        chunk.copy(this.header, this.headerFilled, offset, offset + take);
        this.headerFilled += take;
        offset += take;
        if (this.headerFilled < FRAME_HEADER_BYTES) return;
        this.startFrame();
      }
      const need = this.bodyLength - this.bodyFilled;
      const take = Math.min(need, chunk.byteLength - offset);
      if (take > 0) {
        this.bodyParts.push(chunk.subarray(offset, offset + take));
        this.bodyFilled += take;
        offset += take;
      }
      if (this.bodyFilled === this.bodyLength) this.finishFrame(emit);
    }
  }

  /** Validates type and length from the header alone, before any body byte is kept. */
  private startFrame(): void {
    const type = this.header.readUInt8(0);
    const length = this.header.readUInt32LE(1);
    const name = MESSAGE_NAMES[type];
    if (name === undefined) throw new ProtocolError(`unknown message type 0x${type.toString(16).padStart(2, '0')}`);
    if (this.allowed !== undefined && !this.allowed.has(type)) throw new ProtocolError(`unexpected ${name} message`);
    if (length > this.maxFrameBytes) throw new FrameTooLargeError(`${name} frame`, length, this.maxFrameBytes);
    const fixed = FIXED_LENGTH[type];
    if (fixed !== undefined && length !== fixed) {
      throw new ProtocolError(`${name} frame must be ${fixed} bytes, declares ${length}`);
    }
    const min = MIN_LENGTH[type];
    if (min !== undefined && length < min) throw new ProtocolError(`${name} frame too short: ${length} bytes`);
    this.type = type;
    this.bodyLength = length;
    this.bodyParts = [];
    this.bodyFilled = 0;
  }

  private finishFrame(emit: (event: ParsedEvent) => void): void {
    // A RequestBytes' payload stays in the socket reads it arrived in.
    const message =
      this.type === MessageType.RequestBytes
        ? decodeRequestBytes(this.bodyParts, this.bodyLength)
        : decodeBody(this.type as MessageType, this.bodyParts.length === 1 ? this.bodyParts[0] : Buffer.concat(this.bodyParts, this.bodyLength), this.maxValueBytes);
    this.headerFilled = 0;
    this.bodyParts = [];
    this.bodyLength = -1;
    emit({ kind: 'message', message });
    if (message.type === MessageType.Value) {
      if (message.byteLength === 0) emit({ kind: 'value-end' });
      else this.rawRemaining = message.byteLength;
    }
  }
}

/** Decodes one complete frame body; lengths were checked against the type already. */
export function decodeBody(type: MessageType, body: Buffer, maxValueBytes = DEFAULT_MAX_VALUE_BYTES): Message {
  switch (type) {
    case MessageType.Hello: {
      const magic = body.readUInt32LE(0);
      if (magic !== HELLO_MAGIC) throw new ProtocolError('not a Spillway transfer peer: bad hello magic');
      return { type, version: body.readUInt16LE(4), nonce: copyOf(body, 6, 6 + NONCE_BYTES) };
    }
    case MessageType.HelloOk: {
      const flags = body.readUInt8(2);
      if (flags > 1) throw new ProtocolError(`unknown HelloOk flags 0x${flags.toString(16)}`);
      return {
        type,
        version: body.readUInt16LE(0),
        authRequired: flags === 1,
        nonce: copyOf(body, 3, 3 + NONCE_BYTES),
        proof: copyOf(body, 3 + NONCE_BYTES, 3 + NONCE_BYTES + PROOF_BYTES),
      };
    }
    case MessageType.Auth:
      return { type, proof: copyOf(body, 0, PROOF_BYTES) };
    case MessageType.Ready:
      return { type };
    case MessageType.GetData:
      return decodeGetData(body);
    case MessageType.Value: {
      const byteLength = body.readBigUInt64LE(8);
      if (byteLength > BigInt(maxValueBytes)) throw new FrameTooLargeError('value', byteLength, maxValueBytes);
      return { type, requestId: body.readUInt32LE(0), index: body.readUInt32LE(4), byteLength: Number(byteLength) };
    }
    case MessageType.Missing:
      return { type, requestId: body.readUInt32LE(0), index: body.readUInt32LE(4) };
    case MessageType.DataDone:
      return { type, requestId: body.readUInt32LE(0), answered: body.readUInt32LE(4) };
    case MessageType.Busy:
      return { type, requestId: body.readUInt32LE(0), retryAfterMs: body.readUInt32LE(4) };
    case MessageType.Request:
    case MessageType.Response:
      return { type, requestId: body.readUInt32LE(0), body: body.subarray(4) };
    case MessageType.RequestBytes:
      return decodeRequestBytes([body], body.byteLength);
    case MessageType.Error:
      return decodeError(body);
  }
}

/** Views of bytes [from, to) of the concatenation of `parts`. */
function viewsOf(parts: readonly Buffer[], from: number, to: number): Buffer[] {
  const out: Buffer[] = [];
  let start = 0;
  for (const part of parts) {
    const end = start + part.byteLength;
    if (end > from && start < to) out.push(part.subarray(Math.max(0, from - start), Math.min(part.byteLength, to - start)));
    if (end >= to) break;
    start = end;
  }
  return out;
}

function joined(parts: Buffer[]): Buffer {
  return parts.length === 1 ? parts[0] : Buffer.concat(parts);
}

/** requestId u32, body length u32, msgpack body, then the payload: views of `parts`, not copied. */
function decodeRequestBytes(parts: readonly Buffer[], length: number): Message {
  const head = joined(viewsOf(parts, 0, 8));
  const requestId = head.readUInt32LE(0);
  const bodyLength = head.readUInt32LE(4);
  if (bodyLength > length - 8) throw new ProtocolError(`RequestBytes body of ${bodyLength} bytes overruns its ${length}-byte frame`);
  const body = joined(viewsOf(parts, 8, 8 + bodyLength));
  return { type: MessageType.RequestBytes, requestId, body, payload: viewsOf(parts, 8 + bodyLength, length) };
}

function copyOf(body: Buffer, start: number, end: number): Uint8Array {
  return Uint8Array.prototype.slice.call(body, start, end) as Uint8Array;
}

function decodeString(body: Buffer, start: number, end: number, what: string): string {
  try {
    return utf8.decode(body.subarray(start, end));
  } catch {
    throw new ProtocolError(`${what} is not valid utf-8`);
  }
}

function decodeGetData(body: Buffer): Message {
  const requestId = body.readUInt32LE(0);
  const maxBytes = body.readBigUInt64LE(4);
  const count = body.readUInt32LE(12);
  // Each key takes at least 4 bytes: refuse an impossible count before building the array.
  if (count > (body.byteLength - 16) / 4) throw new ProtocolError(`GetData declares ${count} keys in ${body.byteLength} bytes`);
  const keys: string[] = [];
  let offset = 16;
  for (let i = 0; i < count; i++) {
    if (offset + 4 > body.byteLength) throw new ProtocolError('GetData key table is truncated');
    const length = body.readUInt32LE(offset);
    if (length > body.byteLength - offset - 4) throw new ProtocolError(`GetData key ${i} overruns the frame`);
    keys.push(decodeString(body, offset + 4, offset + 4 + length, `GetData key ${i}`));
    offset += 4 + length;
  }
  if (offset !== body.byteLength) throw new ProtocolError('GetData frame has trailing bytes');
  const max = maxBytes > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(maxBytes);
  return { type: MessageType.GetData, requestId, maxBytes: max, keys };
}

function decodeError(body: Buffer): Message {
  const requestId = body.readUInt32LE(0);
  const codeLength = body.readUInt16LE(4);
  if (6 + codeLength + 4 > body.byteLength) throw new ProtocolError('Error frame code overruns the frame');
  const code = decodeString(body, 6, 6 + codeLength, 'error code');
  const messageLength = body.readUInt32LE(6 + codeLength);
  const start = 10 + codeLength;
  if (start + messageLength !== body.byteLength) throw new ProtocolError('Error frame message length does not match the frame');
  return { type: MessageType.Error, requestId, code, message: decodeString(body, start, start + messageLength, 'error message') };
}
