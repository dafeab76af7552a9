import { setMaxListeners } from 'node:events';
import { encode, encodedBatchesSync, encodedBytesSync, SMALL_ENCODED_BYTES, type Encoded } from '../codec/index.js';
import { ChecksumError, ClosedError, CodecError, SpillCapError, SpillwayError, TierWriteError, TiersFullError } from '../errors.js';
import type { WriteSource } from '../tiers/tier.js';
import { BatchWriter } from './batch-writer.js';
import { secondsSince } from './counters.js';
import { Demoter } from './demoter.js';
import { abortable, timed, verifiedSource } from './encoded-io.js';
import { oneBatch } from '../tiers/chunks.js';
import { DEMOTE_AT } from './chain.js';
import { Slots } from './slots.js';
import { Bucket, type Entry, StoredCopy, type WriteJob } from './entry.js';
import type { StoreState } from './state.js';
import type { UnspillableEvent } from './stats.js';
import { turnBudget } from './turn-budget.js';

/** Values under this many bytes count as small (the DiskTier default for fused segments). */
const SMALL_VALUE_BYTES = 1024 * 1024;
const SMALL_WRITES_IN_FLIGHT = 64;

/**
 * Moves values down: memory → tiers (spilling, LRU first, `spillConcurrency` writes at a
 * time; small values in batches when the first tier has `writeMany`) and tier → next tier
 * (demotion, when a tier passes its capacity). A value being written stays readable from
 * memory; a failed write leaves it there. Nothing is lost.
 */
export class Spiller {
  readonly #writes = new Set<Promise<unknown>>();
  /**
   * Writes with an id up to this one drop their value once written, whatever the memory
   * level: an evict() that wanted more than the LRU held forced the writes then in flight.
   */
  #forceUpTo = 0;
  /** Bytes dropped by writes #forceUpTo forced (what those evict() calls report). */
  #forcedBytes = 0;
  /** Large values: `spillConcurrency` writes at a time. */
  readonly #large: Slots;
  /**
   * Small values get many slots of their own: a tier can then batch them (DiskTier fuses
   * writes that arrive together into one writev), and a 4 KiB write never waits behind a
   * 1 GiB one.
   */
  readonly #small = new Slots(SMALL_WRITES_IN_FLIGHT);
  /** Small values, when the first tier takes batches (`writeMany`). */
  readonly #batches: BatchWriter;
  readonly #demoter: Demoter;
  #retryTimer: NodeJS.Timeout | undefined;
  #stuckReported = false;
  /** Aborted when the store closes (see writeEncoded). */
  readonly #closing = new AbortController();

  constructor(private readonly state: StoreState) {
    // One listener per putEncoded reading a source (removed after each batch): any number of
    // them at once is expected, not the leak Node warns of past 10.
    setMaxListeners(0, this.#closing.signal);
    this.#large = new Slots(state.opts.spillConcurrency);
    const track = (work: Promise<unknown>): void => this.#track(work);
    this.#demoter = new Demoter(state, track);
    this.#batches = new BatchWriter({
      state,
      capAndRoom: (key, bytes) => this.#capAndRoom(key, bytes),
      finish: (entry, job, copy, failure, tierName, quiet) => this.#finish(entry, job, copy, failure, tierName, quiet),
      single: (entry, job, encoded) => this.#slotsFor(entry).run(() => this.#write(entry, job, encoded)),
      afterTierWrite: (t) => this.#demoter.afterTierWrite(t),
      track,
      settled: () => {
        this.state.onShrink();
        this.pump();
      },
    });
  }

  #slotsFor(entry: Entry): Slots {
    return entry.size < SMALL_VALUE_BYTES ? this.#small : this.#large;
  }

  /** No write of this entry can start now: its slots (or batches) are all taken. */
  #busy(entry: Entry): boolean {
    return this.#batches.accepts(entry) ? this.#batches.full : this.#slotsFor(entry).full;
  }

  #track(work: Promise<unknown>): void {
    this.#writes.add(work);
    void work.finally(() => this.#writes.delete(work)).catch(() => undefined);
  }

  /** Starts background writes, LRU first, while memory (net of writes in flight) is over target. */
  pump(): void {
    const { acct, lru, opts } = this.state;
    if (this.state.closed) return;
    while (acct.residentBytes - acct.bytes[Bucket.Spilling] > opts.targetBytes) {
      // Values whose write failed wait outside the LRU until their retry is due (#failed).
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
    // The episode ends once memory is under target, writes in flight counted: retries that
    // only put values in flight again (and fail again) are the same episode.
    if (acct.residentBytes <= opts.targetBytes) this.#stuckReported = false;
    this.state.onShrink();
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
    const inFlight = planned < bytes && this.#writes.size > 0 ? [...this.#writes] : [];
    const forcedBefore = this.#forcedBytes;
    if (inFlight.length > 0) this.#forceUpTo = this.state.newId();
    const freed = await Promise.all(chosen.map((entry) => this.spill(entry, true)));
    await Promise.allSettled(inFlight);
    return freed.reduce((a, b) => a + b, 0) + this.#forcedBytes - forcedBefore;
  }

  /** Resolves when no write or move is in flight. */
  async flush(): Promise<void> {
    while (this.#writes.size > 0) await Promise.allSettled([...this.#writes]);
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
    // Zero until a read touches it while it is written (see #finish).
    entry.lastUsed = 0;
    acct.add(entry);
    if (batched) return job;
    const done = this.#slotsFor(entry)
      .run(() => this.#write(entry, job))
      .finally(() => {
        this.#writes.delete(done);
        this.pump();
      });
    job.done = done;
    this.#writes.add(done);
    return job;
  }

  /**
   * Stores already-encoded bytes straight into the first tier with room, verifying the
   * layout and checksum as they pass. Resolves to the new copy.
   */
  async writeEncoded(key: string, source: Uint8Array | WriteSource, byteLength: number): Promise<StoredCopy> {
    const { counters } = this.state;
    const t = await this.#capAndRoom(key, byteLength);
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
    this.#writes.add(done);
    try {
      await done;
    } finally {
      this.#writes.delete(done);
    }
    counters.writeSeconds += secondsSince(start);
    counters.diskWrites++;
    counters.spilledBytes += byteLength;
    this.#demoter.afterTierWrite(t);
    return new StoredCopy(t, id, byteLength);
  }

  /** Writes one value on its own (`encoded` when a batch already encoded it). */
  async #write(entry: Entry, job: WriteJob, encoded?: Encoded): Promise<number> {
    const { state } = this;
    const { counters } = state;
    let failure: unknown;
    let copy: StoredCopy | undefined;
    let tierName = state.opts.tiers[0].name;
    try {
      if (encoded === undefined) {
        if (entry.removed || job.cancelled || state.closed) throw new ClosedError();
        await turnBudget.spend(Math.min(entry.size, SMALL_ENCODED_BYTES));
        if (entry.removed || job.cancelled || state.closed) throw new ClosedError();
        // Timed from here: the wait for a turn is queueing, not encoding.
        const encodeStart = performance.now();
        encoded = encode(entry.value);
        counters.encodeSeconds += secondsSince(encodeStart);
      } else if (entry.removed || job.cancelled || state.closed) throw new ClosedError();
      const t = await this.#capAndRoom(entry.key, encoded.byteLength);
      const tier = state.opts.tiers[t];
      tierName = tier.name;
      const writeStart = performance.now();
      try {
        await tier.write(job.id, this.#source(encoded), encoded.byteLength);
      } finally {
        state.chain.reserved[t] -= encoded.byteLength;
      }
      counters.writeSeconds += secondsSince(writeStart);
      counters.diskWrites++;
      counters.spilledBytes += encoded.byteLength;
      copy = new StoredCopy(t, job.id, encoded.byteLength);
    } catch (err) {
      failure = err;
    }
    return this.#finish(entry, job, copy, failure, tierName, false);
  }

  /**
   * Ends an entry's write: gives it its copy (and drops the value if memory is over target
   * or the write was forced), or keeps it in memory and reports the failure. With `quiet`
   * the caller does the per-tier and memory follow-ups once for many. Returns bytes freed.
   */
  #finish(entry: Entry, job: WriteJob, copy: StoredCopy | undefined, failure: unknown, tierName: string, quiet: boolean): number {
    const { state } = this;
    const { acct } = state;
    acct.remove(entry);
    entry.write = undefined;
    if (copy === undefined) {
      acct.add(entry);
      if (!entry.removed && !state.closed) this.#failed(entry, failure, tierName);
      else state.relink(entry);
      return 0;
    }
    if (entry.removed || job.cancelled) {
      // Deleted or overwritten while being written: its file must not outlive it.
      acct.add(entry);
      state.orphan(copy);
      return 0;
    }
    state.setCopy(entry, copy);
    state.writeFailure = undefined;
    entry.retryAfter = 0;
    acct.add(entry);
    if (!quiet) this.#demoter.afterTierWrite(copy.tier);
    // A value read while it was written is the most recently used: it goes back in the
    // LRU and the pump drops whatever is older, rather than this one to be read again.
    const usedMeanwhile = entry.lastUsed > 0;
    const forced = !job.force && job.id <= this.#forceUpTo;
    if (entry.pins === 0 && (job.force || forced || (!usedMeanwhile && acct.residentBytes > state.opts.targetBytes))) {
      // Dropped straight away, never linked in the memory LRU in between.
      if (forced) this.#forcedBytes += entry.size;
      state.drop(entry);
      if (!quiet) state.onShrink();
      return entry.size;
    }
    state.relink(entry);
    return 0;
  }

  /**
   * The bytes of an encoded value for a tier: small ones as one buffer laid out at once
   * (per-value overhead dominates there), large ones as batches hashed while written.
   */
  #source(encoded: Encoded): WriteSource {
    const { counters } = this.state;
    if (encoded.byteLength > SMALL_ENCODED_BYTES) return timed(encodedBatchesSync(encoded), (s) => (counters.encodeSeconds += s));
    const start = performance.now();
    const bytes = encodedBytesSync(encoded);
    counters.encodeSeconds += secondsSince(start);
    return oneBatch([bytes]);
  }

  #failed(entry: Entry, err: unknown, tierName: string): void {
    const { counters, opts } = this.state;
    if (err instanceof CodecError) {
      counters.codecErrors++;
      // Counted apart from here on (Accounting.unencodableBytes): no spill can free it.
      this.state.acct.remove(entry);
      entry.unspillable = true;
      this.state.acct.add(entry);
      this.state.report(new CodecError(`key ${JSON.stringify(entry.key.slice(0, 80))} stays in memory: ${err.message}`, { cause: err, key: entry.key }));
    } else {
      entry.retryAfter = performance.now() + opts.retryDelayMs;
      // Out of the LRU until its retry is due: the values behind it keep spilling meanwhile.
      this.state.waiting.add(entry);
      this.#scheduleRetry();
      const failure = err instanceof SpillCapError || err instanceof TiersFullError || err instanceof SpillwayError ? err : new TierWriteError(tierName, entry.key, err);
      if (!(err instanceof SpillCapError || err instanceof TiersFullError)) counters.writeErrors++;
      this.state.writeFailure = failure;
      this.state.report(failure);
    }
    this.state.relink(entry);
  }

  /**
   * Checks maxSpill and finds a tier. The bytes count as used from the check on (while a
   * tier makes room), then are reserved on the tier found in the very step that found room
   * (#room), so concurrent writes cannot all pass the same check. The caller releases the
   * reservation.
   */
  async #capAndRoom(key: string, bytes: number): Promise<number> {
    this.#checkCap(key, bytes);
    const { chain } = this.state;
    chain.unplaced += bytes;
    try {
      return await this.#room(key, bytes);
    } catch (err) {
      chain.unplaced -= bytes;
      throw err;
    }
  }

  #checkCap(key: string, bytes: number): void {
    const used = this.state.chain.usedBytes();
    const cap = this.state.opts.maxSpill;
    if (used + bytes > cap) {
      this.state.counters.spillCapRejections++;
      throw new SpillCapError(key, bytes, cap, used);
    }
  }

  /**
   * The tier a new value of `bytes` goes to: the highest one with room, after moving its
   * coldest values down when it could hold the new one that way. New spills are the
   * warmest data below memory, so they belong at the top, not at the bottom.
   */
  async #room(key: string, bytes: number): Promise<number> {
    const { chain } = this.state;
    // Reserved in the same synchronous step as the check: reserving after `await #room()`
    // left a gap of a few microtasks in which a concurrent write passed the same check.
    const place = (t: number): number => {
      chain.unplaced -= bytes;
      chain.reserved[t] += bytes;
      return t;
    };
    for (let t = 0; t < chain.tiers.length; t++) {
      if (chain.pick(bytes, t) === t) return place(t);
      if (t + 1 < chain.tiers.length && chain.stored(t, bytes) <= chain.tiers[t].capacity * DEMOTE_AT) {
        await this.#demoter.demote(t, bytes);
        if (chain.pick(bytes, t) === t) return place(t);
      }
    }
    throw new TiersFullError(key, bytes);
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

  /** A timer for the first waiting value's retry: then it, and every other one due, go back in the LRU. */
  #scheduleRetry(): void {
    const { waiting } = this.state;
    if (this.#retryTimer !== undefined || this.state.closed || waiting.size === 0) return;
    const first = waiting.values().next().value as Entry;
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      const now = performance.now();
      for (const entry of waiting) {
        if (entry.retryAfter > now) break;
        waiting.delete(entry);
        this.state.relink(entry);
      }
      this.#scheduleRetry();
      // Still the same episode (the flag resets once memory is back under target): a retry
      // that fails again must not report it again, every retry of every value.
      this.pump();
    }, Math.max(1, first.retryAfter - performance.now()));
    this.#retryTimer.unref();
  }

  stop(): void {
    this.#closing.abort();
    clearTimeout(this.#retryTimer);
  }
}

