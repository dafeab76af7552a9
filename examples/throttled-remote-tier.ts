/**
 * An example third-party tier: values stored as files in a directory, behind a link of
 * limited bandwidth and some latency, like a network disk. It uses only Spillway's public
 * entry point, and shows what the Tier contract asks of a tier (see docs/tiers.md).
 *
 *   const remote = new ThrottledRemoteTier({ directory: '/mnt/nfs/spill', bytesPerSecond: 200e6 });
 *   const store = await SpillStore.open({ tiers: [new DiskTier(), remote] });
 */
import { createWriteStream } from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import {
  ClosedError,
  InvalidArgumentError,
  SpillwayError,
  type ByteRange,
  type Tier,
  type TierUsage,
  type WriteItem,
  type WriteResults,
  type WriteSource,
} from '../src/index.js';

export interface ThrottledRemoteTierOptions {
  /** Parent directory; the tier makes a fresh folder of its own in it and removes it on close. */
  directory: string;
  /** Shared by reads and writes, as one network link would be. */
  bytesPerSecond: number;
  /** Added to every operation (a round trip). Default 1 ms. */
  latencyMs?: number;
  name?: string;
  capacity?: number;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function* once(batch: readonly Uint8Array[]): WriteSource {
  yield batch;
}

/** A token bucket on a virtual clock: each transfer books its time on the link, then waits for it. */
class Link {
  private busyUntil = 0;
  constructor(private readonly bytesPerSecond: number) {}
  async transfer(bytes: number): Promise<void> {
    const now = performance.now();
    this.busyUntil = Math.max(this.busyUntil, now) + (bytes / this.bytesPerSecond) * 1000;
    // Waits shorter than a timer tick are paid later, in one go.
    if (this.busyUntil - now > 2) await sleep(this.busyUntil - now);
  }
}

export class ThrottledRemoteTier implements Tier {
  readonly name: string;
  readonly capacity: number;
  private readonly parent: string;
  private readonly latencyMs: number;
  private readonly link: Link;
  private dir: string | undefined;
  private readonly sizes = new Map<number, number>();
  /** Writes in progress, so a delete can cancel one and wait for its cleanup. */
  private readonly writing = new Map<number, { cancelled: boolean; done: Promise<unknown> }>();
  private bytes = 0;
  private closed = false;

  constructor(options: ThrottledRemoteTierOptions) {
    if (typeof options?.directory !== 'string' || options.directory === '') throw new InvalidArgumentError('directory is required');
    if (!(options.bytesPerSecond > 0)) throw new InvalidArgumentError(`bytesPerSecond must be positive, got ${options.bytesPerSecond}`);
    const capacity = options.capacity ?? Infinity;
    if (!(capacity > 0)) throw new InvalidArgumentError(`capacity must be positive, got ${capacity}`);
    const latencyMs = options.latencyMs ?? 1;
    if (!(latencyMs >= 0)) throw new InvalidArgumentError(`latencyMs must be non-negative, got ${latencyMs}`);
    this.parent = options.directory;
    this.link = new Link(options.bytesPerSecond);
    this.latencyMs = latencyMs;
    this.capacity = capacity;
    this.name = options.name ?? 'remote';
  }

  async open(): Promise<void> {
    await fsp.mkdir(this.parent, { recursive: true });
    this.dir = await fsp.mkdtemp(path.join(this.parent, 'remote-'));
  }

  async write(id: number, source: WriteSource, byteLength: number): Promise<void> {
    return this.writeOne(id, source, byteLength, this.latencyMs);
  }

  /**
   * Optional in the contract: the store hands small values over in batches. Here a batch
   * pays one round trip instead of one per value, which is what batching is for on a
   * remote disk. Each value still succeeds or fails on its own.
   */
  async writeMany(items: readonly WriteItem[]): Promise<WriteResults> {
    if (this.closed) throw new ClosedError(`tier "${this.name}"`);
    // Every value is registered (so a delete can cancel it) before the round trip.
    const round = sleep(this.latencyMs);
    return Promise.all(
      items.map((item) =>
        this.writeOne(item.id, once(item.bytes), item.byteLength, round).then(
          (): PromiseSettledResult<void> => ({ status: 'fulfilled', value: undefined }),
          (reason: unknown): PromiseSettledResult<void> => ({ status: 'rejected', reason }),
        ),
      ),
    );
  }

  /** `latency`: the round trip to wait for, in ms, or one already under way. */
  private async writeOne(id: number, source: WriteSource, byteLength: number, latency: number | Promise<void>): Promise<void> {
    if (this.closed) throw new ClosedError(`tier "${this.name}"`);
    if (!Number.isSafeInteger(id) || id < 0) throw new InvalidArgumentError(`bad id ${id}`);
    if (this.sizes.has(id) || this.writing.has(id)) throw new SpillwayError('SPW_ERR_TIER_DUPLICATE_ID', `value ${id} exists`);
    const job = { cancelled: false, done: Promise.resolve() as Promise<unknown> };
    job.done = this.upload(id, source, byteLength, job, latency);
    this.writing.set(id, job);
    try {
      await job.done;
    } finally {
      this.writing.delete(id);
    }
  }

  private async upload(id: number, source: WriteSource, byteLength: number, job: { cancelled: boolean }, latency: number | Promise<void>): Promise<void> {
    const file = this.pathOf(id);
    await (typeof latency === 'number' ? sleep(latency) : latency);
    const out = createWriteStream(file, { flags: 'wx' });
    let written = 0;
    try {
      for await (const batch of source) {
        for (const piece of batch) {
          written += piece.byteLength;
          if (written > byteLength) throw new SpillwayError('SPW_ERR_TIER_LENGTH', `more than ${byteLength} bytes`);
          await this.link.transfer(piece.byteLength);
          // Respect the file stream's backpressure rather than buffering the whole value.
          if (!out.write(piece)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
        }
        if (job.cancelled || this.closed) throw new SpillwayError('SPW_ERR_TIER_CANCELLED', `write of ${id} cancelled`);
      }
      if (written !== byteLength) throw new SpillwayError('SPW_ERR_TIER_LENGTH', `got ${written} of ${byteLength} bytes`);
      out.end();
      await finished(out);
      if (job.cancelled || this.closed) throw new SpillwayError('SPW_ERR_TIER_CANCELLED', `write of ${id} cancelled`);
    } catch (err) {
      // The contract: a failed write leaves nothing behind.
      out.destroy();
      await finished(out).catch(() => undefined);
      await fsp.rm(file, { force: true });
      throw err;
    }
    this.sizes.set(id, byteLength);
    this.bytes += byteLength;
  }

  async read(id: number, onChunk?: (chunk: Uint8Array) => void): Promise<Uint8Array> {
    const size = this.sizeOf(id);
    await sleep(this.latencyMs);
    // allocUnsafeSlow: a buffer of its own, so it starts 8-byte aligned as the contract asks.
    const out = Buffer.allocUnsafeSlow(size);
    const handle = await fsp.open(this.pathOf(id), 'r');
    try {
      for (let offset = 0; offset < size; ) {
        const want = Math.min(1024 * 1024, size - offset);
        await this.link.transfer(want);
        const { bytesRead } = await handle.read(out, offset, want, offset);
        if (bytesRead === 0) throw new SpillwayError('SPW_ERR_TIER_TRUNCATED', `value ${id} is truncated`);
        onChunk?.(out.subarray(offset, offset + bytesRead));
        offset += bytesRead;
      }
    } finally {
      await handle.close();
    }
    return out;
  }

  createReadStream(id: number, range: ByteRange = {}): Readable {
    return Readable.from(this.pieces(id, range), { objectMode: false });
  }

  /** Read lazily: nothing is opened until the stream is read, and `finally` closes the file. */
  private async *pieces(id: number, range: ByteRange): AsyncGenerator<Buffer> {
    const size = this.sizeOf(id);
    for (const n of [range.start, range.end]) {
      if (n !== undefined && (!Number.isSafeInteger(n) || n < 0)) throw new InvalidArgumentError(`bad range bound ${n}`);
    }
    const start = Math.min(range.start ?? 0, size);
    const end = Math.max(start, Math.min(range.end ?? size, size));
    if (start === end) return;
    await sleep(this.latencyMs);
    const handle = await fsp.open(this.pathOf(id), 'r');
    try {
      for (let at = start; at < end; ) {
        const piece = Buffer.allocUnsafe(Math.min(256 * 1024, end - at));
        await this.link.transfer(piece.byteLength);
        const { bytesRead } = await handle.read(piece, 0, piece.byteLength, at);
        if (bytesRead === 0) throw new SpillwayError('SPW_ERR_TIER_TRUNCATED', `value ${id} is truncated`);
        at += bytesRead;
        yield piece.subarray(0, bytesRead);
      }
    } finally {
      await handle.close();
    }
  }

  async delete(id: number): Promise<void> {
    const job = this.writing.get(id);
    if (job !== undefined) {
      job.cancelled = true;
      await job.done.catch(() => undefined);
    }
    const size = this.sizes.get(id);
    if (size === undefined) return;
    this.sizes.delete(id);
    this.bytes -= size;
    await fsp.rm(this.pathOf(id), { force: true });
  }

  usage(): TierUsage {
    return { count: this.sizes.size, bytes: this.bytes };
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.writing.values()].map((job) => job.done.catch(() => undefined)));
    this.sizes.clear();
    this.bytes = 0;
    if (this.dir !== undefined) await fsp.rm(this.dir, { recursive: true, force: true });
  }

  private pathOf(id: number): string {
    if (this.dir === undefined) throw new SpillwayError('SPW_ERR_TIER_NOT_OPEN', `tier "${this.name}" is not open`);
    return path.join(this.dir, `${id}.bin`);
  }

  private sizeOf(id: number): number {
    const size = this.sizes.get(id);
    if (size === undefined) throw new SpillwayError('SPW_ERR_TIER_MISSING', `tier "${this.name}" holds no value ${id}`);
    return size;
  }
}
