import type tls from 'node:tls';
import { InvalidArgumentError } from '../errors.js';
import { withByteOptions, type WithByteOptions } from '../units.js';
import { ClientConnection, type ConnectOptions, type PeerAddress } from './client-connection.js';
import { asError } from './connection.js';
import { BusyError } from './errors.js';
import { ByteBudget } from './limits.js';
import { DEFAULT_MAX_FRAME_BYTES } from './parser.js';
import { GetDataReceiver } from './receiver.js';
import { getDataBodyLength } from './serializer.js';
import type { ReceivingStore } from './store-like.js';

export interface DataClientOptions {
  /** Shared secret; the server must prove it holds it too. */
  token?: string;
  /** TLS settings (ca, servername...); when set the client speaks TLS. */
  tls?: tls.ConnectionOptions;
  /** Encoded bytes asked for per request. Default 50 MB. */
  batchBytes?: number | string;
  /** Bytes of requests in flight per receiving store. Default 10% of its memoryLimit. */
  maxBytesInFlight?: number | string;
  /** Values above this are written to the store's disk without decoding. Default 64 MiB. */
  diskThresholdBytes?: number | string;
  /** Bytes queued for the disk before the socket is paused. Default 8 MiB. */
  diskQueueBytes?: number | string;
  /** Retries of a busy peer before BusyError. Default 6. */
  busyRetries?: number;
  /** First backoff after "busy", doubled each retry (with jitter). Default 25 ms. */
  busyBackoffMs?: number;
  maxBusyBackoffMs?: number;
  /** Deadline for connecting to a peer and completing the handshake; TransferTimeoutError after it. Default 5 s. */
  connectTimeoutMs?: number;
  /** A connection silent this long fails with TransferTimeoutError. Default 60 s. */
  idleTimeoutMs?: number;
  /** Must not exceed the server's maxFrameBytes (key lists are split to fit). Default 16 MiB. */
  maxFrameBytes?: number | string;
  /** Largest single value accepted. Default 64 GiB. */
  maxValueBytes?: number | string;
}

export interface FetchResult {
  /** Keys stored by this fetch. */
  fetched: string[];
  /** Keys the peer does not hold. */
  missing: string[];
  /** Keys the store already held; not fetched. */
  present: string[];
  /** Encoded bytes received and stored. */
  bytes: number;
  /** Of `bytes`, those written to disk without decoding. */
  toDiskBytes: number;
  /** Values written to disk without decoding, and values decoded into memory. */
  toDisk: number;
  toMemory: number;
}

const MiB = 1024 * 1024;

/**
 * Fetches values from DataServers into a store. A fetch is all or nothing: on any error
 * (peer gone, bad bytes, busy) the keys it had stored are deleted again and the typed
 * error is thrown, so the caller can try another holder.
 */
const CLIENT_BYTE_OPTIONS = ['batchBytes', 'maxBytesInFlight', 'diskThresholdBytes', 'diskQueueBytes', 'maxFrameBytes', 'maxValueBytes'] as const;
type ClientByteOptions = (typeof CLIENT_BYTE_OPTIONS)[number];

export class DataClient {
  private readonly options: WithByteOptions<DataClientOptions, ClientByteOptions>;
  private readonly budgets = new WeakMap<ReceivingStore, ByteBudget>();

  constructor(options: DataClientOptions = {}) {
    if (options.token !== undefined && options.token.length === 0) throw new InvalidArgumentError('token must not be empty');
    for (const name of ['connectTimeoutMs', 'idleTimeoutMs'] as const) {
      const value = options[name];
      if (value !== undefined && !(Number.isFinite(value) && value > 0)) throw new InvalidArgumentError(`${name} must be a positive number of milliseconds, got ${value}`);
    }
    this.options = withByteOptions(options, CLIENT_BYTE_OPTIONS);
  }

  /** `signal`: aborting it fails the fetch with a TransferError (the keys it stored are deleted again). */
  async fetch(address: PeerAddress | string, keys: readonly string[], store: ReceivingStore, options: { signal?: AbortSignal } = {}): Promise<FetchResult> {
    const peer = parseAddress(address);
    const result: FetchResult = { fetched: [], missing: [], present: [], bytes: 0, toDiskBytes: 0, toDisk: 0, toMemory: 0 };
    const wanted: string[] = [];
    for (const key of new Set(keys)) (store.has(key) ? result.present : wanted).push(key);
    if (wanted.length === 0) return result;
    const budget = this.budgetFor(store);
    const connection = await ClientConnection.open(peer, { ...this.connectOptions(), signal: options.signal });
    const receivers: GetDataReceiver[] = [];
    try {
      let queue = wanted;
      while (queue.length > 0) {
        const group = takeGroup(queue, (this.options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES) - 64);
        const receiver = await this.getWithRetry(connection, peer, group, store, budget, receivers);
        const answered = receiver.missing.length + receiver.toDisk + receiver.toMemory;
        queue = queue.slice(answered);
      }
    } catch (err) {
      const error = asError(err);
      connection.fail(error);
      await Promise.allSettled(receivers.map((r) => r.settle()));
      for (const receiver of receivers) for (const key of receiver.added) store.delete(key);
      throw error;
    }
    connection.close();
    for (const r of receivers) {
      result.fetched.push(...r.added);
      result.missing.push(...r.missing);
      result.bytes += r.bytes;
      result.toDiskBytes += r.toDiskBytes;
      result.toDisk += r.toDisk;
      result.toMemory += r.toMemory;
    }
    return result;
  }

  /** A generic msgpack request to a server's onRequest handler. */
  async request(address: PeerAddress | string, body: unknown): Promise<unknown> {
    const connection = await ClientConnection.open(parseAddress(address), this.connectOptions());
    try {
      return await connection.request(body);
    } finally {
      connection.close();
    }
  }

  private async getWithRetry(
    connection: ClientConnection,
    peer: PeerAddress,
    keys: readonly string[],
    store: ReceivingStore,
    budget: ByteBudget,
    receivers: GetDataReceiver[],
  ): Promise<GetDataReceiver> {
    const retries = this.options.busyRetries ?? 6;
    const socket = connection.connection.socket;
    for (let attempt = 0; ; attempt++) {
      const held = await budget.acquire(Math.min(this.options.batchBytes ?? 50_000_000, budget.capacity));
      let retryAfterMs: number;
      try {
        const receiver = new GetDataReceiver(
          connection.newRequestId(),
          keys,
          store,
          {
            memoryMaxBytes: Math.min(this.options.diskThresholdBytes ?? 64 * MiB, held),
            diskQueueBytes: this.options.diskQueueBytes ?? 8 * MiB,
            pause: () => socket.pause(),
            resume: () => socket.resume(),
          },
          (err) => connection.fail(err),
        );
        receivers.push(receiver);
        const outcome = await connection.getData(receiver, keys, held);
        await receiver.settle();
        if (outcome.kind === 'done') return receiver;
        retryAfterMs = outcome.retryAfterMs;
      } finally {
        budget.release(held);
      }
      if (attempt >= retries) throw new BusyError(`${peer.host}:${peer.port}`, attempt + 1);
      const maxBackoff = this.options.maxBusyBackoffMs ?? 1000;
      const base = Math.min(maxBackoff, (this.options.busyBackoffMs ?? 25) * 2 ** attempt);
      // The peer's hint is a u32 it chose: honoured only up to the longest backoff, so a
      // hostile or confused peer cannot park the fetch for days.
      await sleep(Math.min(maxBackoff, Math.max(retryAfterMs, base * (0.5 + Math.random() / 2))));
    }
  }

  private budgetFor(store: ReceivingStore): ByteBudget {
    let budget = this.budgets.get(store);
    if (budget === undefined) {
      budget = new ByteBudget(this.options.maxBytesInFlight ?? Math.floor(store.memoryLimit * 0.1));
      this.budgets.set(store, budget);
    }
    return budget;
  }

  private connectOptions(): ConnectOptions {
    return {
      token: this.options.token,
      tls: this.options.tls,
      connectTimeoutMs: this.options.connectTimeoutMs ?? 5_000,
      idleTimeoutMs: this.options.idleTimeoutMs ?? 60_000,
      maxFrameBytes: this.options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES,
      maxValueBytes: this.options.maxValueBytes,
    };
  }
}

/** The longest prefix of `keys` whose GetData fits in `maxBody` bytes (at least one key). */
function takeGroup(keys: readonly string[], maxBody: number): string[] {
  let length = getDataBodyLength([]);
  let count = 0;
  while (count < keys.length) {
    length += 4 + Buffer.byteLength(keys[count], 'utf8');
    if (count > 0 && length > maxBody) break;
    count++;
  }
  return keys.slice(0, count);
}

export function parseAddress(address: PeerAddress | string): PeerAddress {
  if (typeof address !== 'string') return address;
  const match = /^\[?([^\]]+?)\]?:(\d+)$/.exec(address);
  if (match === null) throw new InvalidArgumentError(`not a host:port address: ${address}`);
  return { host: match[1], port: Number(match[2]) };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
