/**
 * The transfer protocol's messages (docs/protocol.md). Every message is a frame:
 *
 *   0  1  type (MessageType)
 *   1  4  body length L (u32 LE), excluding these 5 bytes
 *   5  L  body
 *
 * One exception: a `Value` frame is followed by exactly `byteLength` raw bytes (the
 * value in the codec format), which are not part of L. They are streamed, never framed
 * again, so a 1 GiB value costs 5 + 16 bytes of overhead and no copy.
 */
export const PROTOCOL_VERSION = 1;
/** "SPWT" read as u32 LE: opens every connection, so a stray client fails fast. */
export const HELLO_MAGIC = 0x54575053;
export const FRAME_HEADER_BYTES = 5;
export const NONCE_BYTES = 32;
export const PROOF_BYTES = 32;

export enum MessageType {
  Hello = 0x01,
  HelloOk = 0x02,
  Auth = 0x03,
  Ready = 0x04,
  GetData = 0x10,
  Value = 0x11,
  Missing = 0x12,
  DataDone = 0x13,
  Busy = 0x14,
  Request = 0x20,
  Response = 0x21,
  RequestBytes = 0x22,
  Error = 0x7f,
}

/**
 * What a server of either plane (data or control) takes first, and next when it asks for a
 * token: refused on the frame header otherwise, so no body is buffered before the proof.
 */
export const SERVER_HELLO_TYPES: ReadonlySet<number> = new Set([MessageType.Hello]);
export const SERVER_AUTH_TYPES: ReadonlySet<number> = new Set([MessageType.Auth]);

/** Client → server, first frame: magic, version, the client's nonce. */
export interface HelloMessage {
  readonly type: MessageType.Hello;
  readonly version: number;
  readonly nonce: Uint8Array;
}

/** Server → client: the version spoken, whether a token is required, the server's nonce and proof. */
export interface HelloOkMessage {
  readonly type: MessageType.HelloOk;
  readonly version: number;
  readonly authRequired: boolean;
  readonly nonce: Uint8Array;
  /** HMAC proving the server knows the token; all zero when no token is set. */
  readonly proof: Uint8Array;
}

/** Client → server: HMAC proving the client knows the token. */
export interface AuthMessage {
  readonly type: MessageType.Auth;
  readonly proof: Uint8Array;
}

/** Server → client: handshake complete, requests may flow. */
export interface ReadyMessage {
  readonly type: MessageType.Ready;
}

/** Client → server: send these keys, at most `maxBytes` of values (always at least one). */
export interface GetDataMessage {
  readonly type: MessageType.GetData;
  readonly requestId: number;
  readonly maxBytes: number;
  readonly keys: readonly string[];
}

/** Server → client: keys[index] follows as `byteLength` raw bytes. */
export interface ValueMessage {
  readonly type: MessageType.Value;
  readonly requestId: number;
  readonly index: number;
  readonly byteLength: number;
}

/** Server → client: keys[index] is not held here. */
export interface MissingMessage {
  readonly type: MessageType.Missing;
  readonly requestId: number;
  readonly index: number;
}

/** Server → client: keys[0, answered) were answered; the rest did not fit in maxBytes. */
export interface DataDoneMessage {
  readonly type: MessageType.DataDone;
  readonly requestId: number;
  readonly answered: number;
}

/** Server → client: too many requests in progress; retry after the hint or try another holder. */
export interface BusyMessage {
  readonly type: MessageType.Busy;
  readonly requestId: number;
  readonly retryAfterMs: number;
}

/** Either way: a generic call whose body is msgpack (used by workers and the scheduler). */
export interface RequestMessage {
  readonly type: MessageType.Request;
  readonly requestId: number;
  readonly body: Uint8Array;
}

/**
 * Client → server: a Request whose msgpack body is followed by raw bytes (the rest of the
 * frame), handed to the handler as the views of the socket reads they arrived in: bulk
 * bytes (shuffle pieces) are neither copied into msgpack nor joined into one buffer.
 */
export interface RequestBytesMessage {
  readonly type: MessageType.RequestBytes;
  readonly requestId: number;
  readonly body: Uint8Array;
  readonly payload: readonly Uint8Array[];
}

export interface ResponseMessage {
  readonly type: MessageType.Response;
  readonly requestId: number;
  readonly body: Uint8Array;
}

/** An error for one request (requestId > 0) or for the connection (0, then it closes). */
export interface ErrorMessage {
  readonly type: MessageType.Error;
  readonly requestId: number;
  readonly code: string;
  readonly message: string;
}

export type Message =
  | HelloMessage
  | HelloOkMessage
  | AuthMessage
  | ReadyMessage
  | GetDataMessage
  | ValueMessage
  | MissingMessage
  | DataDoneMessage
  | BusyMessage
  | RequestMessage
  | RequestBytesMessage
  | ResponseMessage
  | ErrorMessage;

/** What the parser emits: messages, then for a Value its raw bytes in pieces, then its end. */
export type ParsedEvent =
  | { readonly kind: 'message'; readonly message: Message }
  | { readonly kind: 'value-chunk'; readonly bytes: Buffer }
  | { readonly kind: 'value-end' };

export const MESSAGE_NAMES: Readonly<Record<number, string>> = {
  [MessageType.Hello]: 'Hello',
  [MessageType.HelloOk]: 'HelloOk',
  [MessageType.Auth]: 'Auth',
  [MessageType.Ready]: 'Ready',
  [MessageType.GetData]: 'GetData',
  [MessageType.Value]: 'Value',
  [MessageType.Missing]: 'Missing',
  [MessageType.DataDone]: 'DataDone',
  [MessageType.Busy]: 'Busy',
  [MessageType.Request]: 'Request',
  [MessageType.Response]: 'Response',
  [MessageType.RequestBytes]: 'RequestBytes',
  [MessageType.Error]: 'Error',
};
