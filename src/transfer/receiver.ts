import { ValueHasher, checkChecksum, decodeBody, parseLayout, type Layout } from '../codec/index.js';
import { FormatError } from '../errors.js';
import { ProtocolError } from './errors.js';
import type { ParsedEvent } from './messages.js';
import { MessageType } from './messages.js';
import type { ReceivingStore } from './store-like.js';

/** Smallest possible encoded value: 16-byte prefix + 8-byte trailer. */
const MIN_VALUE_BYTES = 24;

export interface ReceiveOptions {
  /** Values above this go to the store's disk tier without decoding. */
  memoryMaxBytes: number;
  /** Bytes queued for the disk before the socket is paused. */
  diskQueueBytes: number;
  pause(): void;
  resume(): void;
}

export type GetDataOutcome = { kind: 'busy'; retryAfterMs: number } | { kind: 'done'; answered: number };

/** A value being received: bytes in, then either stored or rejected. */
interface Sink {
  push(bytes: Buffer): void;
  end(): void;
  fail(err: Error): void;
}

/**
 * Receives the answer to one GetData: checks that every message belongs to it and comes
 * in order, and routes each value to memory (decoded as views over one aligned buffer) or
 * to disk (store.putEncoded, bytes passed through). A key is stored only once its
 * checksum matched; `added` lists what was stored so a failed fetch can undo it.
 */
export class GetDataReceiver {
  readonly added: string[] = [];
  readonly missing: string[] = [];
  toDisk = 0;
  toMemory = 0;
  bytes = 0;
  /** Of `bytes`, those written to disk as they came. */
  toDiskBytes = 0;
  private next = 0;
  private sink: Sink | undefined;
  private readonly pending: Promise<void>[] = [];
  private failure: Error | undefined;
  /**
   * Disk queues over their limit. The socket resumes only when none is: two values can
   * cross the limit in one socket chunk, and the first one draining must not lift the
   * second one's pause.
   */
  private pausers = 0;
  private readonly flow: Pick<ReceiveOptions, 'pause' | 'resume'> = {
    pause: () => {
      if (this.pausers++ === 0) this.options.pause();
    },
    resume: () => {
      if (--this.pausers === 0) this.options.resume();
    },
  };

  constructor(
    readonly requestId: number,
    private readonly keys: readonly string[],
    private readonly store: ReceivingStore,
    private readonly options: ReceiveOptions,
    /** Called with the first error of a sink (checksum, disk): the request is lost. */
    private readonly onSinkError: (err: Error) => void,
  ) {}

  /** Handles one event; returns the outcome when the request is complete. Throws on bad input. */
  onEvent(event: ParsedEvent): GetDataOutcome | undefined {
    if (event.kind === 'value-chunk') {
      this.sink?.push(event.bytes);
      return undefined;
    }
    if (event.kind === 'value-end') {
      const sink = this.sink;
      this.sink = undefined;
      sink?.end();
      return undefined;
    }
    const message = event.message;
    switch (message.type) {
      case MessageType.Value:
        this.expect(message.requestId, message.index);
        this.sink = this.open(this.keys[message.index], message.byteLength);
        this.next++;
        return undefined;
      case MessageType.Missing:
        this.expect(message.requestId, message.index);
        this.missing.push(this.keys[message.index]);
        this.next++;
        return undefined;
      case MessageType.DataDone:
        if (message.requestId !== this.requestId) throw new ProtocolError(`DataDone for unknown request ${message.requestId}`);
        if (message.answered !== this.next) {
          throw new ProtocolError(`DataDone says ${message.answered} keys answered, ${this.next} were received`);
        }
        // The server always answers at least one key; a DataDone answering none would make
        // the client ask for the same keys again, forever.
        if (message.answered === 0 && this.keys.length > 0) throw new ProtocolError('DataDone answers none of the keys asked for');
        return { kind: 'done', answered: message.answered };
      case MessageType.Busy:
        if (message.requestId !== this.requestId || this.next > 0) throw new ProtocolError('unexpected Busy');
        return { kind: 'busy', retryAfterMs: message.retryAfterMs };
      default:
        throw new ProtocolError(`unexpected message type ${message.type} during get-data`);
    }
  }

  private expect(requestId: number, index: number): void {
    if (requestId !== this.requestId) throw new ProtocolError(`answer for unknown request ${requestId}`);
    if (index !== this.next || index >= this.keys.length) {
      throw new ProtocolError(`answer for key ${index}, expected key ${this.next} of ${this.keys.length}`);
    }
  }

  private open(key: string, byteLength: number): Sink {
    if (byteLength < MIN_VALUE_BYTES) throw new FormatError(`an encoded value has at least ${MIN_VALUE_BYTES} bytes, got ${byteLength}`);
    const toDisk = byteLength > this.options.memoryMaxBytes || this.store.isAboveTarget() || this.store.paused;
    const commit = (): void => {
      this.added.push(key);
      this.bytes += byteLength;
      if (toDisk) this.toDiskBytes += byteLength;
    };
    let sink: Sink;
    if (toDisk) {
      this.toDisk++;
      const queue = new ChunkQueue({ diskQueueBytes: this.options.diskQueueBytes, ...this.flow });
      const put = this.store.putEncoded(key, queue, byteLength).then(commit);
      this.track(put, () => queue.abandon());
      sink = queue;
    } else {
      this.toMemory++;
      sink = new MemorySink(byteLength, (value) => {
        this.store.set(key, value, { size: byteLength });
        commit();
      });
    }
    return sink;
  }

  private track(promise: Promise<void>, onError: () => void): void {
    this.pending.push(
      promise.catch((err: unknown) => {
        onError();
        const error = err instanceof Error ? err : new FormatError(String(err));
        this.failure ??= error;
        this.onSinkError(error);
      }),
    );
  }

  /** The connection failed: values still arriving are dropped, nothing partial is stored. */
  abort(err: Error): void {
    this.failure ??= err;
    this.sink?.fail(err);
    this.sink = undefined;
  }

  /** Waits until every value of this request is stored or rejected; throws the first error. */
  async settle(): Promise<void> {
    await Promise.all(this.pending);
    if (this.failure !== undefined) throw this.failure;
  }
}

/** Collects a value into one buffer of its own (8-byte aligned), hashing as bytes land. */
class MemorySink implements Sink {
  private readonly buffer: Buffer;
  private readonly hasher: ValueHasher;
  private filled = 0;
  private layout: Layout | undefined;

  constructor(
    private readonly byteLength: number,
    private readonly store: (value: unknown) => void,
  ) {
    this.buffer = Buffer.allocUnsafeSlow(byteLength);
    this.hasher = new ValueHasher(byteLength - 8);
  }

  push(bytes: Buffer): void {
    const start = this.filled;
    this.buffer.set(bytes, start);
    this.filled += bytes.byteLength;
    this.hasher.update(bytes);
    if (this.layout === undefined) {
      const layout = parseLayout(this.buffer.subarray(0, this.filled), this.byteLength);
      if (typeof layout !== 'number') {
        if (layout.totalLength !== this.byteLength) {
          throw new FormatError(`declared ${this.byteLength} bytes but the value's layout says ${layout.totalLength}`);
        }
        this.layout = layout;
      }
    }
  }

  end(): void {
    if (this.layout === undefined) throw new FormatError('encoded value has no complete layout');
    checkChecksum(this.buffer, this.layout, this.hasher.digest(), 'received value');
    this.store(decodeBody(this.buffer, this.layout));
  }

  fail(): void {
    // Nothing was stored; the buffer is garbage once dropped.
  }
}

/**
 * The bytes of a value on their way to store.putEncoded, as batches for writev. Pauses
 * the socket when the disk falls behind, so memory stays bounded by `diskQueueBytes`.
 */
class ChunkQueue implements Sink, AsyncIterable<readonly Uint8Array[]> {
  private chunks: Buffer[] = [];
  private queued = 0;
  private ended = false;
  private error: Error | undefined;
  private abandoned = false;
  private paused = false;
  private wake: (() => void) | undefined;

  constructor(private readonly options: Pick<ReceiveOptions, 'diskQueueBytes' | 'pause' | 'resume'>) {}

  push(bytes: Buffer): void {
    if (this.abandoned) return;
    this.chunks.push(bytes);
    this.queued += bytes.byteLength;
    if (this.queued >= this.options.diskQueueBytes && !this.paused) {
      this.paused = true;
      this.options.pause();
    }
    this.wake?.();
  }

  end(): void {
    this.ended = true;
    this.wake?.();
  }

  fail(err: Error): void {
    this.error ??= err;
    this.wake?.();
  }

  /** The consumer gave up (checksum, disk error): drop what still arrives. */
  abandon(): void {
    this.abandoned = true;
    this.chunks = [];
    this.queued = 0;
    this.unpause();
  }

  private unpause(): void {
    if (this.paused) {
      this.paused = false;
      this.options.resume();
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<readonly Uint8Array[]> {
    try {
      for (;;) {
        if (this.error !== undefined) throw this.error;
        if (this.chunks.length > 0) {
          const batch = this.chunks;
          this.chunks = [];
          this.queued = 0;
          this.unpause();
          yield batch;
          continue;
        }
        if (this.ended) return;
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
      }
    } finally {
      if (this.error !== undefined || !this.ended) this.abandon();
    }
  }
}
