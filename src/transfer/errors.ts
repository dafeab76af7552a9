import { SpillwayError } from '../errors.js';

/**
 * Errors of the transfer layer. Each has a stable `code` (docs/protocol.md#error-codes).
 * A connection-level error closes only the connection it happened on.
 */

/** The peer sent bytes that are not valid protocol: unknown type, malformed body, wrong order. */
export class ProtocolError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_PROTOCOL', message);
  }
}

/** The two sides share no protocol version. */
export class ProtocolVersionError extends SpillwayError {
  readonly offered: number;
  constructor(offered: number, supported: number) {
    super('SPW_ERR_PROTOCOL_VERSION', `peer speaks protocol version ${offered}; this side supports ${supported}`);
    this.offered = offered;
  }
}

/** A declared length is above the configured maximum; refused before allocating it. */
export class FrameTooLargeError extends SpillwayError {
  readonly declared: number;
  readonly limit: number;
  constructor(what: string, declared: number | bigint, limit: number) {
    super('SPW_ERR_FRAME_TOO_LARGE', `${what} declares ${declared} bytes, above the limit of ${limit}`);
    this.declared = Number(declared);
    this.limit = limit;
  }
}

/** Authentication failed: wrong or missing token on either side. */
export class AuthError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_AUTH', message);
  }
}

/** The peer stayed busy after every retry; try another holder of the keys. */
export class BusyError extends SpillwayError {
  readonly address: string;
  readonly attempts: number;
  constructor(address: string, attempts: number) {
    super('SPW_ERR_BUSY', `peer ${address} is busy (gave up after ${attempts} attempts)`);
    this.address = address;
    this.attempts = attempts;
  }
}

/** The connection failed or closed mid-transfer (peer killed, stream truncated). */
export class TransferError extends SpillwayError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SPW_ERR_TRANSFER', message, options);
  }
}

/** The peer did not answer within the configured time. */
export class TransferTimeoutError extends SpillwayError {
  constructor(what: string, ms: number) {
    super('SPW_ERR_TIMEOUT', `${what} timed out after ${ms} ms`);
  }
}

/** The peer reported an error of its own; `remoteCode` is its code. */
export class RemoteError extends SpillwayError {
  readonly remoteCode: string;
  constructor(remoteCode: string, message: string) {
    super('SPW_ERR_REMOTE', `peer error ${remoteCode}: ${message}`);
    this.remoteCode = remoteCode;
  }
}

/**
 * TLS failed: a certificate or key that cannot be read or does not match, a certificate not
 * signed by the cluster's CA (on either side), or a peer that does not speak TLS when this
 * side does (or the reverse).
 */
export class TlsError extends SpillwayError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SPW_ERR_TLS', message, options);
  }
}
