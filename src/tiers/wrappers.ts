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
  /**
   * Present only when the inner tier has it and the subclass overrides neither `read` nor
   * `createReadStream`: a wrapper that changes what reads return (latency, faults) sees every
   * read, as the store then reads through those two.
   */
  readonly readInto?: (id: number, out: Uint8Array) => Promise<void>;
  constructor(protected readonly inner: Tier) {
    const stats = inner.stats?.bind(inner);
    if (stats !== undefined) this.stats = stats;
    const estimate = inner.estimateStoredBytes?.bind(inner);
    if (estimate !== undefined) this.estimateStoredBytes = estimate;
    if (inner.writeMany !== undefined) this.writeMany = (items) => this.writeBatch(items);
    const readInto = inner.readInto?.bind(inner);
    if (readInto !== undefined && this.read === TierWrapper.prototype.read && this.createReadStream === TierWrapper.prototype.createReadStream) this.readInto = readInto;
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
