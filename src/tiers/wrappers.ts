import type { Readable } from 'node:stream';
import { packedWritesOf, writePacked, type PackedTier, type PackedWrites } from './packed.js';
import type { ByteRange, Tier, TierStats, TierUsage, WriteItem, WriteResults, WriteSource } from './tier.js';

/**
 * Wraps a tier and forwards every call. The base for test and instrumentation wrappers
 * (and a template for third-party tiers that decorate another one).
 */
export class TierWrapper implements Tier, PackedTier {
  /** Forwarded only when the inner tier has it, so `tier.stats?.()` still tells the truth. */
  readonly stats?: () => TierStats;
  /** Forwarded only when the inner tier has it (a compressing tier wrapped still admits by stored bytes). */
  readonly estimateStoredBytes?: (byteLength: number) => number;
  /**
   * Present only when the inner tier has it (the store then batches small values through
   * the wrapper too); it goes through `writeBatch`, which subclasses override.
   */
  readonly writeMany?: (items: readonly WriteItem[]) => Promise<WriteResults>;
  /**
   * The store's packed batches (packed.ts), passed straight to the inner tier, unless a
   * subclass overrides `writeBatch`: it wants to see every batch's items, so the store
   * then sends it `writeMany` calls only.
   */
  readonly [writePacked]?: PackedWrites;
  constructor(protected readonly inner: Tier) {
    const stats = inner.stats?.bind(inner);
    if (stats !== undefined) this.stats = stats;
    const estimate = inner.estimateStoredBytes?.bind(inner);
    if (estimate !== undefined) this.estimateStoredBytes = estimate;
    if (inner.writeMany !== undefined) this.writeMany = (items) => this.writeBatch(items);
    const packed = packedWritesOf(inner);
    if (packed !== undefined && this.writeBatch === TierWrapper.prototype.writeBatch) this[writePacked] = packed;
  }
  /** What `writeMany` does (only called when the inner tier has one): forwards the batch. */
  protected writeBatch(items: readonly WriteItem[]): Promise<WriteResults> {
    return (this.inner.writeMany as NonNullable<Tier['writeMany']>).call(this.inner, items);
  }
  get name(): string {
    return this.inner.name;
  }
  get capacity(): number {
    return this.inner.capacity;
  }
  open(): Promise<void> {
    return this.inner.open();
  }
  write(id: number, source: WriteSource, byteLength: number): Promise<void> {
    return this.inner.write(id, source, byteLength);
  }
  read(id: number, onChunk?: (chunk: Uint8Array) => void): Promise<Uint8Array> {
    return this.inner.read(id, onChunk);
  }
  createReadStream(id: number, range?: ByteRange): Readable {
    return this.inner.createReadStream(id, range);
  }
  delete(id: number): Promise<void> {
    return this.inner.delete(id);
  }
  usage(): TierUsage {
    return this.inner.usage();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Adds latency to every write, read and delete: a slow or remote disk, without blocking. */
export class SlowTier extends TierWrapper {
  constructor(
    inner: Tier,
    readonly latencyMs: number,
  ) {
    super(inner);
  }
  override async write(id: number, source: WriteSource, byteLength: number): Promise<void> {
    await sleep(this.latencyMs);
    return this.inner.write(id, source, byteLength);
  }
  /** One round trip for the whole batch: that is what batching saves on a slow link. */
  protected override async writeBatch(items: readonly WriteItem[]): Promise<WriteResults> {
    await sleep(this.latencyMs);
    return super.writeBatch(items);
  }
  override async read(id: number, onChunk?: (chunk: Uint8Array) => void): Promise<Uint8Array> {
    await sleep(this.latencyMs);
    return this.inner.read(id, onChunk);
  }
  override async delete(id: number): Promise<void> {
    await sleep(this.latencyMs);
    return this.inner.delete(id);
  }
}

export interface FaultPlan {
  /**
   * Return an errno code (e.g. 'ENOSPC') to fail this write, or undefined to let it through.
   * Asked for every item of a `writeMany` too: a failed item fails alone.
   */
  failWrite?: (id: number, byteLength: number) => string | undefined;
  /** Return an errno code to fail a whole `writeMany` call (nothing of it stored). */
  failBatch?: (ids: readonly number[]) => string | undefined;
  /** Return true to flip a byte in what this read returns (a corrupt disk). */
  corruptRead?: (id: number) => boolean;
  /** Return an errno code to fail this read. */
  failRead?: (id: number) => string | undefined;
}

/** Injects faults: failing writes, failing or corrupt reads. Failed writes store nothing. */
export class FaultyTier extends TierWrapper {
  writeFailures = 0;
  /** `writeMany` calls that reached this wrapper, failed or not. */
  batches = 0;
  corruptedReads = 0;
  constructor(
    inner: Tier,
    public plan: FaultPlan = {},
  ) {
    super(inner);
  }
  override async write(id: number, source: WriteSource, byteLength: number): Promise<void> {
    const code = this.plan.failWrite?.(id, byteLength);
    if (code !== undefined) {
      this.writeFailures++;
      // Drain part of the source first, as a real disk filling up mid-write would.
      for await (const _batch of source) break;
      throw errnoError(code, 'write');
    }
    return this.inner.write(id, source, byteLength);
  }
  protected override async writeBatch(items: readonly WriteItem[]): Promise<WriteResults> {
    this.batches++;
    const whole = this.plan.failBatch?.(items.map((item) => item.id));
    if (whole !== undefined) {
      this.writeFailures += items.length;
      throw errnoError(whole, 'writev');
    }
    const results: WriteResults = new Array(items.length);
    const passed: WriteItem[] = [];
    const at: number[] = [];
    items.forEach((item, i) => {
      const code = this.plan.failWrite?.(item.id, item.byteLength);
      if (code === undefined) {
        passed.push(item);
        at.push(i);
      } else {
        this.writeFailures++;
        results[i] = { status: 'rejected', reason: errnoError(code, 'write') };
      }
    });
    if (passed.length > 0) (await super.writeBatch(passed)).forEach((r, k) => (results[at[k]] = r));
    return results;
  }
  override async read(id: number, onChunk?: (chunk: Uint8Array) => void): Promise<Uint8Array> {
    const code = this.plan.failRead?.(id);
    if (code !== undefined) throw errnoError(code, 'read');
    if (this.plan.corruptRead?.(id) !== true) return this.inner.read(id, onChunk);
    this.corruptedReads++;
    // Corrupt before the caller hashes: deliver the pieces only after flipping a byte.
    const bytes = await this.inner.read(id);
    if (bytes.byteLength > 0) bytes[Math.floor(bytes.byteLength / 2)] ^= 0xff;
    onChunk?.(bytes);
    return bytes;
  }
}

function errnoError(code: string, syscall: string): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(`${code}: injected ${syscall} failure`);
  err.code = code;
  err.syscall = syscall;
  return err;
}
