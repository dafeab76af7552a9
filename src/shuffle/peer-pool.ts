/**
 * Data-plane connections to peers, kept open across a worker's transfers: a connection
 * answers one request at a time, so concurrent pushes to one peer each take an idle
 * connection or open another.
 */
import type tls from 'node:tls';
import { ClientConnection, type PeerAddress } from '../transfer/client-connection.js';
import { DEFAULT_MAX_FRAME_BYTES } from '../transfer/parser.js';

/** Idle connections kept per peer. */
const MAX_IDLE = 4;

export class PeerPool {
  readonly #token: string | undefined;
  readonly #tls: tls.ConnectionOptions | undefined;
  readonly #idle = new Map<string, ClientConnection[]>();
  #closed = false;

  constructor(token: string | undefined, tlsOptions: tls.ConnectionOptions | undefined) {
    this.#token = token;
    this.#tls = tlsOptions;
  }

  /** A request to a peer; `payload`, if any, follows the body as raw bytes (ClientConnection.request). */
  async request(address: PeerAddress, body: unknown, payload?: Uint8Array): Promise<unknown> {
    const name = `${address.host}:${address.port}`;
    const connection =
      this.#idle.get(name)?.pop() ??
      (await ClientConnection.open(address, { token: this.#token, tls: this.#tls, connectTimeoutMs: 10_000, idleTimeoutMs: 120_000, maxFrameBytes: DEFAULT_MAX_FRAME_BYTES }));
    let answer: unknown;
    try {
      answer = await connection.request(body, payload);
    } catch (err) {
      // A refused push (an error answer) leaves the connection usable; anything else does not.
      connection.close();
      throw err;
    }
    const idle = this.#idle.get(name) ?? [];
    if (this.#closed || idle.length >= MAX_IDLE) connection.close();
    else {
      idle.push(connection);
      this.#idle.set(name, idle);
    }
    return answer;
  }

  close(): void {
    this.#closed = true;
    for (const list of this.#idle.values()) for (const connection of list) connection.close();
    this.#idle.clear();
  }
}
