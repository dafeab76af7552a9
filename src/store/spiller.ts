import { setMaxListeners } from 'node:events';
import { ChecksumError, SpillwayError, TierWriteError } from '../errors.js';
import type { WriteSource } from '../tiers/tier.js';
import { BatchWriter } from './batch-writer.js';
import { secondsSince } from './counters.js';
import { Demoter } from './demoter.js';
import { abortable, verifiedSource } from './encoded-io.js';
import { Bucket, type Entry, StoredCopy, type WriteJob } from './entry.js';
import { InFlight } from './in-flight.js';
import { SingleWrites } from './single-writes.js';
import { SpillPlacement } from './spill-placement.js';
import type { StoreState } from './state.js';
import type { UnspillableEvent } from './stats.js';
import { WriteEndings } from './write-endings.js';

/**
 * Moves values down: memory → tiers (spilling, LRU first, `spillConcurrency` writes at a
 * time; small values in batches when the first tier has `writeMany`) and tier → next tier
 * (demotion, when a tier passes its capacity). A value being written stays readable from
 * memory; a failed write leaves it there. Nothing is lost.
 */
export class Spiller {
  readonly #inFlight = new InFlight();
  readonly #demoter: Demoter;
  readonly #placement: SpillPlacement;
  readonly #endings: WriteEndings;
  readonly #singles: SingleWrites;
  /** Small values, when the first tier takes batches (`writeMany`). */
  readonly #batches: BatchWriter;
  #stuckReported = false;
  /** Aborted when the store closes (see writeEncoded). */
  readonly #closing = new AbortController();

  constructor(private readonly state: StoreState) {
    // One listener per putEncoded reading a source (removed after each batch): any number of
    // them at once is expected, not the leak Node warns of past 10.
    setMaxListeners(0, this.#closing.signal);
    this.#demoter = new Demoter(state, this.#inFlight);
    this.#placement = new SpillPlacement(state, this.#demoter);
    this.#endings = new WriteEndings(state, this.#demoter, this);
    this.#singles = new SingleWrites(state, this.#placement, this.#endings);
    this.#batches = new BatchWriter({
      state,
      placement: this.#placement,
      endings: this.#endings,
      singles: this.#singles,
      demoter: this.#demoter,
      inFlight: this.#inFlight,
      pump: this,
    });
  }

  /** No write of this entry can start now: its slots (or batches) are all taken. */
  #busy(entry: Entry): boolean {
    return this.#batches.accepts(entry) ? this.#batches.full : this.#singles.full(entry);
  }

  /** Starts background writes, LRU first, while memory (net of writes in flight) is over target. */
  pump(): void {
    const { acct, lru, opts } = this.state;
    if (this.state.closed) return;
    while (acct.residentBytes - acct.bytes[Bucket.Spilling] > opts.targetBytes) {
      // Values whose write failed wait outside the LRU until their retry is due (WriteEndings).
      const entry = lru.oldest();
      if (entry === undefined) {
        this.#reportStuck();
        // Values dropped above may have brought memory back under the resume level.
        this.state.onShrink();
        return;
      }
      if (entry.copy !== undefined) {
        this.state.drop(entry);
        continue;
      }
      if (this.#busy(entry)) {
        // Every write slot is busy: values that already have a copy below can still go,
        // for free. Without this, reads that bring values back (weak hits, loads) would
        // grow memory past target until a write finishes.
        this.#dropCopied();
        this.state.onShrink();
        return;
      }
      this.#start(entry, false);
    }
    this.state.onShrink();
  }

  /**
   * The stuck episode ends once memory is under target, writes in flight counted: retries
   * that only put values in flight again (and fail again) are the same episode. Checked on
   * every growth and shrink, since memory can get there without the pump running (a retried
   * write that lands drops its value; evict() spills directly).
   */
  noteUnderTarget(): void {
    if (this.state.acct.residentBytes <= this.state.opts.targetBytes) this.#stuckReported = false;
  }

  /** Drops LRU values that have a copy below until memory net of writes is at target. */
  #dropCopied(): void {
    const { acct, lru, opts } = this.state;
    for (;;) {
      if (acct.residentBytes - acct.bytes[Bucket.Spilling] <= opts.targetBytes) return;
      const entry = lru.oldestClean();
      if (entry === undefined) return;
      this.state.drop(entry);
    }
  }

  /** Spills LRU first until `bytes` are out of memory; resolves to the bytes evicted. */
  async evict(bytes: number): Promise<number> {
    const chosen: Entry[] = [];
    let planned = 0;
    for (const entry of this.state.lru.fromOldest()) {
      if (planned >= bytes) break;
      chosen.push(entry);
      planned += entry.size;
    }
    // Values the pump is writing left the LRU, and each is dropped when its write lands only
    // if memory is still over target then: short of `bytes`, evict() wants them gone too.
    const inFlight = planned < bytes && this.#inFlight.size > 0 ? this.#inFlight.current() : [];
    const forcedBefore = this.#endings.forcedBytes;
    if (inFlight.length > 0) this.#endings.forceWritesUpTo(this.state.newId());
    const freed = await Promise.all(chosen.map((entry) => this.spill(entry, true)));
    await Promise.allSettled(inFlight);
    return freed.reduce((a, b) => a + b, 0) + this.#endings.forcedBytes - forcedBefore;
  }

  /** Resolves when no write or move is in flight. */
  flush(): Promise<void> {
    return this.#inFlight.settled();
  }

  /**
   * Writes one entry's value below memory; resolves to the bytes freed from memory. With
   * `force` (evict(), or a value larger than the target) the value is dropped once written.
   */
  spill(entry: Entry, force: boolean): Promise<number> {
    if (entry.write !== undefined) return entry.write.done.then(() => 0);
    if (entry.copy !== undefined) {
      if (!entry.resident || entry.pins > 0) return Promise.resolve(0);
      this.state.drop(entry);
      this.state.onShrink();
      return Promise.resolve(entry.size);
    }
    return this.#start(entry, force).done;
  }

  /** Starts writing an entry that has no copy and no write yet: in a batch, or on its own. */
  #start(entry: Entry, force: boolean): WriteJob {
    const id = this.state.newId();
    const batched = this.#batches.accepts(entry);
    const job: WriteJob = batched ? this.#batches.add(entry, id, force) : { id, cancelled: false, force, done: Promise.resolve(0) };
    const { acct } = this.state;
    acct.remove(entry);
    entry.write = job;
    this.state.lru.unlink(entry);
    // Zero until a read touches it while it is written (see WriteEndings.finish).
    entry.lastUsed = 0;
    acct.add(entry);
    if (batched) return job;
    const done = this.#singles.run(entry, job).finally(() => {
      this.#inFlight.delete(done);
      this.pump();
    });
    job.done = done;
    this.#inFlight.add(done);
    return job;
  }

  /**
   * Stores already-encoded bytes straight into the first tier with room, verifying the
   * layout and checksum as they pass. Resolves to the new copy.
   */
  async writeEncoded(key: string, source: Uint8Array | WriteSource, byteLength: number): Promise<StoredCopy> {
    const { counters } = this.state;
    const t = await this.#placement.reserve(key, byteLength);
    const tier = this.state.opts.tiers[t];
    const id = this.state.newId();
    const start = performance.now();
    const done = (async () => {
      try {
        // A caller's source that stalls must not hold close() up: it fails when the store closes.
        await tier.write(id, verifiedSource(source instanceof Uint8Array ? source : abortable(source, this.#closing.signal), byteLength), byteLength);
      } catch (err) {
        if (err instanceof ChecksumError) counters.checksumErrors++;
        throw err instanceof SpillwayError ? err : new TierWriteError(tier.name, key, err);
      } finally {
        this.state.chain.reserved[t] -= byteLength;
      }
    })();
    this.#inFlight.add(done);
    try {
      await done;
    } finally {
      this.#inFlight.delete(done);
    }
    counters.writeSeconds += secondsSince(start);
    counters.diskWrites++;
    counters.spilledBytes += byteLength;
    this.#demoter.afterTierWrite(t);
    return new StoredCopy(t, id, byteLength);
  }

  /** Memory is over target and nothing more can be spilled now: say exactly why. */
  #reportStuck(): void {
    const { acct, opts } = this.state;
    if (this.#stuckReported || acct.bytes[Bucket.Spilling] > 0) return;
    this.#stuckReported = true;
    const event: UnspillableEvent = {
      residentBytes: acct.residentBytes,
      targetBytes: opts.targetBytes,
      pinned: acct.get(Bucket.Pinned),
      memory: acct.get(Bucket.Memory),
      reason: this.state.waiting.size > 0 ? 'write-failures' : acct.bytes[Bucket.Memory] > 0 ? 'unencodable' : 'all-pinned',
    };
    this.state.events.emit('unspillable', event);
  }

  stop(): void {
    this.#closing.abort();
    this.#endings.stop();
  }
}

