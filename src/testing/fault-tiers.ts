/**
 * Tiers that misbehave on purpose, wrapping a real one: slow (latency on every call) and
 * faulty (failing writes and reads, corrupt reads), for testing what a store does then.
 */
import { TierWrapper } from '../tiers/wrappers.js';
import type { Tier, WriteItem, WriteResults, WriteSource } from '../tiers/tier.js';

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
