import type { Readable } from 'node:stream';
import type { ByteRange, Tier, TierStats, TierUsage, WriteSource } from './tier.js';

/**
 * Wraps a tier and forwards every call. The base for test and instrumentation wrappers
 * (and a template for third-party tiers that decorate another one).
 */
export class TierWrapper implements Tier {
  /** Forwarded only when the inner tier has it, so `tier.stats?.()` still tells the truth. */
  readonly stats?: () => TierStats;
  constructor(protected readonly inner: Tier) {
    const stats = inner.stats?.bind(inner);
    if (stats !== undefined) this.stats = stats;
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
  /** Return an errno code (e.g. 'ENOSPC') to fail this write, or undefined to let it through. */
  failWrite?: (id: number, byteLength: number) => string | undefined;
  /** Return true to flip a byte in what this read returns (a corrupt disk). */
  corruptRead?: (id: number) => boolean;
  /** Return an errno code to fail this read. */
  failRead?: (id: number) => string | undefined;
}

/** Injects faults: failing writes, failing or corrupt reads. Failed writes store nothing. */
export class FaultyTier extends TierWrapper {
  writeFailures = 0;
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
