import { EventEmitter } from 'node:events';
import { checkChecksum, Crc32, decodeBody, encode, encodedBatches, layoutOfBytes, sizeof } from '../codec/index.js';
import {
  ChecksumError,
  ClosedError,
  CodecError,
  InvalidArgumentError,
  KeyNotFoundError,
  SpillCapError,
  SpillwayError,
  TierReadError,
  TierWriteError,
} from '../errors.js';
import type { Tier, WriteSource } from '../tiers/tier.js';
import { newCounters, secondsSince } from './counters.js';
import { asEncodedStream, memoryStream, timed, verifiedSource, type EncodedReadStream } from './encoded-io.js';
import { Accounting, Bucket, Entry, type StoredCopy } from './entry.js';
import { Lease } from './lease.js';
import { LruList } from './lru.js';
import { MemoryMonitor } from './monitor.js';
import { resolveOptions, type ResolvedOptions, type SpillStoreOptions } from './options.js';
import { buildStats, type StoreStats, type UnspillableEvent } from './stats.js';

/** Key of the invariant checker used by tests (not part of the public API). */
export const checkInvariants = Symbol('spillway.checkInvariants');

export interface SetOptions {
  /** In-memory size in bytes, when you know it better than the estimate. */
  size?: number;
}

/**
 * A memory-bounded key-value store that spills to a chain of tiers (disk by default).
 * Disk work is always asynchronous; a key has at most one in-memory copy; spilled values
 * stay in their encoded form, ready to stream to peers. See docs/architecture.md.
 */
export class SpillStore extends EventEmitter {
  readonly #opts: ResolvedOptions;
  readonly #entries = new Map<string, Entry>();
  readonly #lru = new LruList<Entry>();
  readonly #acct = new Accounting();
  readonly #counters = newCounters();
  readonly #registry = new FinalizationRegistry<{ entry: Entry; token: object }>((held) => this.#collected(held));
  readonly #writes = new Set<Promise<unknown>>();
  readonly #monitor: MemoryMonitor;
  #activeWrites = 0;
  #queuedWrites = 0;
  #writeWaiters: (() => void)[] = [];
  #monitorEvicting = false;
  #nextId = 0;
  #reservedBytes = 0;
  #closed = false;
  #paused = false;
  #resumeWaiters: (() => void)[] = [];
  #retryTimer: NodeJS.Timeout | undefined;
  #stuckReported = false;
  #lastWarning = new Map<string, number>();

  private constructor(opts: ResolvedOptions) {
    super();
    this.#opts = opts;
    this.#monitor = new MemoryMonitor(opts.monitorInterval, (rss) => this.#onProcessMemory(rss));
  }

  /** Opens a store: prepares its tiers (a fresh spill folder) and starts the memory monitor. */
  static async open(options: SpillStoreOptions = {}): Promise<SpillStore> {
    const store = new SpillStore(resolveOptions(options));
    const opened: Tier[] = [];
    try {
      for (const tier of store.#opts.tiers) {
        await tier.open();
        opened.push(tier);
      }
    } catch (err) {
      await Promise.allSettled(opened.map((t) => t.close()));
      throw err;
    }
    store.#monitor.start();
    return store;
  }

  get memoryLimit(): number {
    return this.#opts.memoryLimit;
  }
  get targetBytes(): number {
    return this.#opts.targetBytes;
  }
  get paused(): boolean {
    return this.#paused;
  }
  get closed(): boolean {
    return this.#closed;
  }
  get size(): number {
    return this.#entries.size;
  }
  get tiers(): readonly Tier[] {
    return this.#opts.tiers;
  }
  keys(): IterableIterator<string> {
    return this.#entries.keys();
  }
  /** Bytes held strongly in memory (unpinned, being spilled, pinned). */
  get residentBytes(): number {
    return this.#acct.residentBytes;
  }
  isAboveTarget(): boolean {
    return this.#acct.residentBytes > this.#opts.targetBytes;
  }

  /** Stores a value in memory. Synchronous, no I/O: spilling happens in the background. */
  set(key: string, value: unknown, options: SetOptions = {}): void {
    this.#assertOpen();
    assertKey(key);
    const size = options.size ?? sizeof(value);
    if (typeof size !== 'number' || !Number.isFinite(size) || size < 0) {
      throw new InvalidArgumentError(`size must be a non-negative number of bytes, got ${String(options.size)}`);
    }
    const old = this.#entries.get(key);
    if (old !== undefined) this.#remove(old);
    const entry = new Entry(key, value, size);
    this.#entries.set(key, entry);
    this.#acct.add(entry);
    if (size > this.#opts.targetBytes) {
      // Larger than the whole target: it would only push everything else out. Straight to disk.
      void this.#spill(entry, true);
    } else {
      entry.slot = this.#lru.push(entry);
    }
    this.#afterGrowth();
  }

  /** The value; resolves without I/O when it is in memory. Rejects KeyNotFoundError. */
  get(key: string): Promise<unknown> {
    if (this.#closed) return Promise.reject(new ClosedError());
    const entry = this.#entries.get(key);
    if (entry === undefined) return Promise.reject(new KeyNotFoundError(key));
    if (entry.resident) {
      if (entry.slot >= 0) this.#lru.touch(entry.slot);
      return (entry.resolved ??= Promise.resolve(entry.value));
    }
    return this.#load(entry);
  }

  /** The value if it is in memory (never any I/O), else undefined. */
  peek(key: string): unknown {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.resident) {
      if (entry.slot >= 0) this.#lru.touch(entry.slot);
      return entry.value;
    }
    return this.#reattach(entry);
  }

  has(key: string): boolean {
    return this.#entries.has(key);
  }

  /**
   * 'memory' while the store holds the value, else the name of the tier holding it, or
   * undefined if the key is absent. A dropped value still alive elsewhere reports its tier
   * (the store no longer holds it; `stats().detached` counts it); reading it needs no I/O.
   */
  where(key: string): string | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.resident || entry.copy === undefined) return 'memory';
    return this.#opts.tiers[entry.copy.tier].name;
  }

  /** Removes a key now; its file is removed in the background. */
  delete(key: string): boolean {
    const entry = this.#entries.get(key);
    if (entry === undefined) return false;
    this.#remove(entry);
    this.#checkResume();
    return true;
  }

  /** Loads the keys (one read each, shared with concurrent readers) and pins them. */
  async acquire(keys: Iterable<string>): Promise<Lease> {
    this.#assertOpen();
    const wanted = [...new Set(keys)];
    const entries: Entry[] = [];
    for (const key of wanted) {
      const entry = this.#entries.get(key);
      if (entry === undefined) throw new KeyNotFoundError(key);
      entries.push(entry);
    }
    for (const entry of entries) this.#pin(entry);
    let values: unknown[];
    try {
      values = await Promise.all(entries.map((e) => (e.resident ? e.value : this.#load(e))));
    } catch (err) {
      for (const entry of entries) this.#unpin(entry);
      throw err;
    }
    return new Lease(new Map(wanted.map((key, i) => [key, values[i]])), () => {
      for (const entry of entries) this.#unpin(entry);
    });
  }

  /**
   * The encoded bytes of a value: from memory (encoded from the value's own memory) or
   * straight from its tier without decoding. The key stays pinned until the stream ends.
   */
  createReadStream(key: string): EncodedReadStream {
    this.#assertOpen();
    const entry = this.#entries.get(key);
    if (entry === undefined) throw new KeyNotFoundError(key);
    if (entry.resident || entry.copy === undefined) {
      const encoded = encode(entry.value);
      this.#pin(entry);
      const stream = memoryStream(encoded);
      stream.once('close', () => this.#unpin(entry));
      this.#counters.streamedFromMemoryBytes += encoded.byteLength;
      return asEncodedStream(stream, encoded.byteLength, 'memory');
    }
    const copy = entry.copy;
    const tier = this.#opts.tiers[copy.tier];
    entry.readers++;
    const stream = tier.createReadStream(copy.id);
    stream.once('close', () => this.#doneReading(entry, copy));
    this.#counters.streamedFromTierBytes += copy.bytes;
    return asEncodedStream(stream, copy.bytes, tier.name);
  }

  /**
   * Stores already-encoded bytes (from a peer) straight into the first tier, without
   * decoding them; the checksum is verified on the way and nothing is stored on mismatch.
   */
  async putEncoded(key: string, source: Uint8Array | WriteSource, byteLength: number): Promise<void> {
    this.#assertOpen();
    assertKey(key);
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) throw new InvalidArgumentError('byteLength must be a whole number of bytes');
    this.#checkCap(key, byteLength);
    const tierIndex = 0;
    const tier = this.#opts.tiers[tierIndex];
    const id = ++this.#nextId;
    this.#reservedBytes += byteLength;
    const start = performance.now();
    try {
      await tier.write(id, verifiedSource(source, byteLength), byteLength);
    } catch (err) {
      if (err instanceof ChecksumError) this.#counters.checksumErrors++;
      throw err instanceof SpillwayError ? err : new TierWriteError(tier.name, key, err);
    } finally {
      this.#reservedBytes -= byteLength;
    }
    this.#counters.writeSeconds += secondsSince(start);
    this.#counters.diskWrites++;
    this.#counters.spilledBytes += byteLength;
    if (this.#closed) {
      await tier.delete(id).catch(() => undefined);
      throw new ClosedError();
    }
    const old = this.#entries.get(key);
    if (old !== undefined) this.#remove(old);
    const entry = new Entry(key, undefined, byteLength);
    entry.resident = false;
    entry.copy = { tier: tierIndex, id, bytes: byteLength };
    this.#entries.set(key, entry);
  }

  /** Spills now, least recently used first, until `bytes` are out of memory (default: all it can). Resolves to the bytes evicted. */
  async evict(bytes = Infinity): Promise<number> {
    this.#assertOpen();
    const chosen: Entry[] = [];
    let planned = 0;
    for (const entry of this.#lru.fromOldest()) {
      if (planned >= bytes) break;
      if (entry.retryAfter > performance.now()) continue;
      chosen.push(entry);
      planned += entry.size;
    }
    const freed = await Promise.all(chosen.map((entry) => this.#spill(entry, true)));
    return freed.reduce((a, b) => a + b, 0);
  }

  /** Resolves when no write is in flight. */
  async flush(): Promise<void> {
    while (this.#writes.size > 0) await Promise.allSettled([...this.#writes]);
  }

  /** Resolves at once when not paused, else when the store resumes. */
  whenResumed(): Promise<void> {
    if (!this.#paused || this.#closed) return Promise.resolve();
    return new Promise((resolve) => this.#resumeWaiters.push(resolve));
  }

  stats(): StoreStats {
    return buildStats({
      acct: this.#acct,
      counters: this.#counters,
      tiers: this.#opts.tiers,
      paused: this.#paused,
      keys: this.#entries.size,
      memoryLimit: this.#opts.memoryLimit,
      targetBytes: this.#opts.targetBytes,
    });
  }

  /** Stops the monitor, waits for writes in flight, removes every file the store wrote. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#monitor.stop();
    clearTimeout(this.#retryTimer);
    await this.flush();
    for (const entry of this.#entries.values()) this.#remove(entry, false);
    this.#entries.clear();
    this.#setPaused(false);
    await Promise.allSettled(this.#opts.tiers.map((t) => t.close()));
  }

  /**
   * Recomputes every bucket from scratch and checks the internal invariants; returns the
   * violations found (none expected). For tests: O(keys).
   */
  [checkInvariants](): string[] {
    const problems: string[] = [];
    const fresh = new Accounting();
    for (const [key, entry] of this.#entries) {
      fresh.add(entry);
      const name = JSON.stringify(key.slice(0, 40));
      if (entry.key !== key || entry.removed) problems.push(`${name}: stale entry in the map`);
      const evictable = entry.resident && entry.pins === 0 && entry.write === undefined && !entry.unspillable;
      if (evictable !== entry.slot >= 0) problems.push(`${name}: LRU link ${entry.slot} but evictable=${evictable}`);
      if (!entry.resident && entry.copy === undefined) problems.push(`${name}: neither in memory nor below`);
      if (entry.resident && entry.detached) problems.push(`${name}: resident and detached`);
      if (entry.pins < 0 || entry.readers < 0) problems.push(`${name}: negative pins or readers`);
    }
    for (let b = 0; b < 5; b++) {
      if (b === Bucket.None) continue;
      if (fresh.counts[b] !== this.#acct.counts[b] || Math.abs(fresh.bytes[b] - this.#acct.bytes[b]) > 1e-6) {
        problems.push(`bucket ${b}: counted ${this.#acct.counts[b]}/${this.#acct.bytes[b]}, actual ${fresh.counts[b]}/${fresh.bytes[b]}`);
      }
    }
    if (this.#lru.size !== [...this.#lru.fromOldest()].length) problems.push('LRU size does not match its links');
    return problems;
  }

  // ---- internals -------------------------------------------------------------------

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError();
  }

  #pin(entry: Entry): void {
    this.#acct.remove(entry);
    entry.pins++;
    if (entry.slot >= 0) {
      this.#lru.remove(entry.slot);
      entry.slot = -1;
    }
    this.#acct.add(entry);
  }

  #unpin(entry: Entry): void {
    this.#acct.remove(entry);
    entry.pins--;
    this.#acct.add(entry);
    this.#relink(entry);
    this.#afterGrowth();
  }

  /** Puts an entry back in the LRU if it may be evicted now. */
  #relink(entry: Entry): void {
    if (entry.slot < 0 && entry.resident && !entry.removed && entry.pins === 0 && entry.write === undefined && !entry.unspillable) {
      entry.slot = this.#lru.push(entry);
    }
  }

  #remove(entry: Entry, deleteCopy = true): void {
    this.#acct.remove(entry);
    entry.removed = true;
    this.#entries.delete(entry.key);
    if (entry.slot >= 0) {
      this.#lru.remove(entry.slot);
      entry.slot = -1;
    }
    if (entry.write !== undefined) entry.write.cancelled = true;
    if (entry.weakToken !== undefined) this.#registry.unregister(entry.weakToken);
    entry.weak = entry.weakToken = entry.value = entry.resolved = undefined;
    entry.detached = false;
    if (entry.copy !== undefined && deleteCopy) {
      entry.copyOrphaned = true;
      if (entry.readers === 0) this.#deleteCopy(entry.copy);
    }
  }

  #deleteCopy(copy: StoredCopy): void {
    const tier = this.#opts.tiers[copy.tier];
    tier.delete(copy.id).catch((err: unknown) => this.#report(new TierWriteError(tier.name, `#${copy.id}`, err)));
  }

  #doneReading(entry: Entry, copy: StoredCopy): void {
    entry.readers--;
    if (entry.readers === 0 && entry.copyOrphaned) this.#deleteCopy(copy);
  }

  /** A dropped value that is still alive elsewhere comes back without I/O. */
  #reattach(entry: Entry): unknown {
    const value = entry.detached ? entry.weak?.deref() : undefined;
    if (value === undefined) return undefined;
    this.#acct.remove(entry);
    if (entry.weakToken !== undefined) this.#registry.unregister(entry.weakToken);
    entry.weak = entry.weakToken = undefined;
    entry.detached = false;
    entry.resident = true;
    entry.value = value;
    this.#acct.add(entry);
    this.#relink(entry);
    this.#counters.weakHits++;
    this.#afterGrowth();
    return value;
  }

  #collected(held: { entry: Entry; token: object }): void {
    const { entry, token } = held;
    if (entry.weakToken !== token || !entry.detached || entry.removed) return;
    this.#acct.remove(entry);
    entry.detached = false;
    entry.weak = entry.weakToken = undefined;
    this.#acct.add(entry);
  }

  /** Single-flight load: every concurrent reader shares one read and one decode. */
  #load(entry: Entry): Promise<unknown> {
    const alive = this.#reattach(entry);
    if (alive !== undefined) return Promise.resolve(alive);
    if (entry.load !== undefined) {
      this.#counters.sharedLoads++;
      return entry.load;
    }
    const copy = entry.copy;
    if (copy === undefined) return Promise.reject(new KeyNotFoundError(entry.key));
    entry.readers++;
    entry.load = this.#readCopy(entry.key, copy).then(
      (value) => {
        entry.load = undefined;
        this.#doneReading(entry, copy);
        if (!entry.removed && !entry.resident) {
          this.#acct.remove(entry);
          entry.resident = true;
          entry.value = value;
          this.#acct.add(entry);
          this.#relink(entry);
          this.#afterGrowth();
        }
        // A reader that started before a delete or overwrite still gets what it asked for.
        return entry.removed ? value : entry.value;
      },
      (err: unknown) => {
        entry.load = undefined;
        this.#doneReading(entry, copy);
        throw err;
      },
    );
    return entry.load;
  }

  async #readCopy(key: string, copy: StoredCopy): Promise<unknown> {
    const tier = this.#opts.tiers[copy.tier];
    const crc = new Crc32();
    let hashSeconds = 0;
    let hashed = 0;
    const hashLimit = copy.bytes - 8;
    const start = performance.now();
    let bytes: Uint8Array;
    try {
      bytes = await tier.read(copy.id, (chunk) => {
        const t = performance.now();
        const take = Math.min(chunk.byteLength, Math.max(0, hashLimit - hashed));
        if (take > 0) crc.update(take === chunk.byteLength ? chunk : chunk.subarray(0, take));
        hashed += chunk.byteLength;
        hashSeconds += secondsSince(t);
      });
    } catch (err) {
      this.#counters.readErrors++;
      throw new TierReadError(tier.name, key, err);
    }
    this.#counters.readSeconds += secondsSince(start);
    const decodeStart = performance.now();
    try {
      const layout = layoutOfBytes(bytes);
      if (hashed !== bytes.byteLength) {
        // The tier did not report its pieces: hash the whole buffer now.
        crc.value = 0;
        crc.update(bytes.subarray(0, layout.trailerOffset));
      }
      checkChecksum(bytes, layout, crc.value, `value of key ${JSON.stringify(key.slice(0, 80))} in tier "${tier.name}"`);
      const value = decodeBody(bytes, layout);
      this.#counters.diskReads++;
      this.#counters.unspilledBytes += bytes.byteLength;
      return value;
    } catch (err) {
      if (err instanceof ChecksumError) this.#counters.checksumErrors++;
      else this.#counters.readErrors++;
      this.#report(err);
      throw err;
    } finally {
      this.#counters.decodeSeconds += hashSeconds + secondsSince(decodeStart);
    }
  }

  /** Called after anything that may add resident bytes. */
  #afterGrowth(): void {
    const resident = this.#acct.residentBytes;
    if (resident > this.#opts.pauseBytes) this.#setPaused(true);
    if (resident > this.#opts.targetBytes) this.#pump();
    else this.#checkResume();
  }

  /** Starts background writes, LRU first, while memory (net of writes in flight) is over target. */
  #pump(): void {
    if (this.#closed) return;
    const now = performance.now();
    while (this.#acct.residentBytes - this.#acct.bytes[Bucket.Spilling] > this.#opts.targetBytes) {
      const entry = this.#lru.oldest();
      if (entry === undefined || entry.retryAfter > now) {
        this.#reportStuck(entry);
        return;
      }
      if (entry.copy !== undefined) {
        this.#drop(entry);
        continue;
      }
      if (this.#activeWrites + this.#queuedWrites >= this.#opts.spillConcurrency) return;
      void this.#spill(entry, false);
    }
    this.#stuckReported = false;
    this.#checkResume();
  }

  /** Memory is over target and nothing more can be spilled now: say exactly why. */
  #reportStuck(next: Entry | undefined): void {
    if (next !== undefined) this.#scheduleRetry(next.retryAfter - performance.now());
    if (this.#stuckReported || this.#acct.bytes[Bucket.Spilling] > 0) return;
    this.#stuckReported = true;
    const event: UnspillableEvent = {
      residentBytes: this.#acct.residentBytes,
      targetBytes: this.#opts.targetBytes,
      pinned: this.#acct.get(Bucket.Pinned),
      memory: this.#acct.get(Bucket.Memory),
      reason:
        next !== undefined ? 'write-failures' : this.#acct.bytes[Bucket.Memory] > 0 ? 'unencodable' : 'all-pinned',
    };
    this.emit('unspillable', event);
  }

  #scheduleRetry(delay: number): void {
    if (this.#retryTimer !== undefined || this.#closed) return;
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      this.#stuckReported = false;
      this.#pump();
    }, Math.max(1, delay));
    this.#retryTimer.unref();
  }

  /** Drops the in-memory value of an entry that has a copy below; keeps a weak reference. */
  #drop(entry: Entry): void {
    this.#acct.remove(entry);
    if (entry.slot >= 0) {
      this.#lru.remove(entry.slot);
      entry.slot = -1;
    }
    const value = entry.value;
    if ((typeof value === 'object' && value !== null) || typeof value === 'function') {
      const token = {};
      entry.weak = new WeakRef(value);
      entry.weakToken = token;
      entry.detached = true;
      this.#registry.register(value, { entry, token }, token);
    }
    entry.value = entry.resolved = undefined;
    entry.resident = false;
    this.#acct.add(entry);
    this.#counters.evictions++;
  }

  #checkCap(key: string, bytes: number): void {
    const used = this.#tierBytes() + this.#reservedBytes;
    if (used + bytes > this.#opts.maxSpill) {
      this.#counters.spillCapRejections++;
      throw new SpillCapError(key, bytes, this.#opts.maxSpill, used);
    }
  }

  #tierBytes(): number {
    let total = 0;
    for (const tier of this.#opts.tiers) total += tier.usage().bytes;
    return total;
  }

  /**
   * Writes one entry's value below memory. The value stays readable from memory during
   * the write; on any failure it stays in memory and the error is reported. Resolves to
   * the bytes freed from memory.
   */
  #spill(entry: Entry, force: boolean): Promise<number> {
    if (entry.write !== undefined) return entry.write.done.then(() => 0);
    if (entry.copy !== undefined) {
      if (!entry.resident || entry.pins > 0) return Promise.resolve(0);
      this.#drop(entry);
      this.#afterShrink();
      return Promise.resolve(entry.size);
    }
    const job = { id: ++this.#nextId, cancelled: false, force, done: Promise.resolve(0) };
    this.#acct.remove(entry);
    entry.write = job;
    if (entry.slot >= 0) {
      this.#lru.remove(entry.slot);
      entry.slot = -1;
    }
    this.#acct.add(entry);
    this.#queuedWrites++;
    job.done = this.#writeEntry(entry, job).finally(() => {
      this.#writes.delete(job.done);
      this.#pump();
    });
    this.#writes.add(job.done);
    return job.done;
  }

  /** Waits for one of the `spillConcurrency` write slots. */
  #writeSlot(): Promise<void> {
    const take = (): void => {
      this.#queuedWrites--;
      this.#activeWrites++;
    };
    if (this.#activeWrites < this.#opts.spillConcurrency) {
      take();
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#writeWaiters.push(() => (take(), resolve())));
  }

  #releaseWriteSlot(): void {
    this.#activeWrites--;
    this.#writeWaiters.shift()?.();
  }

  async #writeEntry(entry: Entry, job: { id: number; cancelled: boolean; force: boolean }): Promise<number> {
    await this.#writeSlot();
    try {
      return await this.#writeEntryNow(entry, job);
    } finally {
      this.#releaseWriteSlot();
    }
  }

  async #writeEntryNow(entry: Entry, job: { id: number; cancelled: boolean; force: boolean }): Promise<number> {
    const tierIndex = 0;
    const tier = this.#opts.tiers[tierIndex];
    let failure: unknown;
    let byteLength = 0;
    const encodeStart = performance.now();
    try {
      if (entry.removed || job.cancelled || this.#closed) throw new ClosedError();
      const encoded = encode(entry.value);
      this.#counters.encodeSeconds += secondsSince(encodeStart);
      byteLength = encoded.byteLength;
      this.#checkCap(entry.key, byteLength);
      this.#reservedBytes += byteLength;
      const writeStart = performance.now();
      try {
        const source = timed(encodedBatches(encoded), (s) => (this.#counters.encodeSeconds += s));
        await tier.write(job.id, source, byteLength);
      } finally {
        this.#reservedBytes -= byteLength;
      }
      this.#counters.writeSeconds += secondsSince(writeStart);
      this.#counters.diskWrites++;
      this.#counters.spilledBytes += byteLength;
    } catch (err) {
      failure = err;
    }
    this.#acct.remove(entry);
    entry.write = undefined;
    if (failure !== undefined) {
      this.#acct.add(entry);
      if (!entry.removed && !this.#closed) this.#spillFailed(entry, failure, tier.name);
      else this.#relink(entry);
      return 0;
    }
    if (entry.removed || job.cancelled) {
      // Deleted or overwritten while being written: its file must not outlive it.
      this.#deleteCopy({ tier: tierIndex, id: job.id, bytes: byteLength });
      return 0;
    }
    entry.copy = { tier: tierIndex, id: job.id, bytes: byteLength };
    entry.retryAfter = 0;
    this.#acct.add(entry);
    this.#relink(entry);
    if (entry.pins === 0 && (job.force || this.#acct.residentBytes > this.#opts.targetBytes)) {
      this.#drop(entry);
      this.#afterShrink();
      return entry.size;
    }
    return 0;
  }

  #spillFailed(entry: Entry, err: unknown, tierName: string): void {
    if (err instanceof CodecError) {
      this.#counters.codecErrors++;
      entry.unspillable = true;
      this.#report(new CodecError(`key ${JSON.stringify(entry.key.slice(0, 80))} stays in memory: ${err.message}`, { cause: err, key: entry.key }));
    } else {
      entry.retryAfter = performance.now() + this.#opts.retryDelay;
      if (err instanceof SpillCapError) this.#report(err);
      else {
        this.#counters.writeErrors++;
        this.#report(err instanceof SpillwayError && !(err instanceof ChecksumError) ? err : new TierWriteError(tierName, entry.key, err));
      }
    }
    this.#relink(entry);
  }

  #afterShrink(): void {
    this.#checkResume();
  }

  #onProcessMemory(rss: number): void {
    if (this.#closed) return;
    if (rss > this.#opts.pauseBytes) this.#setPaused(true);
    if (rss > this.#opts.spillBytes && !this.#monitorEvicting) {
      // Spill enough managed data to bring the process back to target, LRU first. One
      // round at a time: RSS only drops once the writes in flight finish.
      this.#monitorEvicting = true;
      this.evict(rss - this.#opts.targetBytes)
        .catch((err: unknown) => this.#report(err))
        .finally(() => (this.#monitorEvicting = false));
    }
    this.#checkResume(rss);
  }

  #checkResume(rss = this.#monitor.lastRss): void {
    if (!this.#paused) return;
    const resumeAt = Math.min(this.#opts.targetBytes, this.#opts.pauseBytes);
    if (this.#acct.residentBytes > resumeAt) return;
    if (this.#monitor.enabled && rss > resumeAt) return;
    this.#setPaused(false);
  }

  #setPaused(paused: boolean): void {
    if (paused === this.#paused) return;
    this.#paused = paused;
    if (paused) {
      this.emit('pause', { residentBytes: this.#acct.residentBytes, rss: this.#monitor.lastRss });
    } else {
      this.emit('resume', { residentBytes: this.#acct.residentBytes, rss: this.#monitor.lastRss });
      for (const resolve of this.#resumeWaiters.splice(0)) resolve();
    }
  }

  /** 'error' events when someone listens; otherwise a rate-limited process warning, never a crash. */
  #report(err: unknown): void {
    if (this.listenerCount('error') > 0) {
      this.emit('error', err);
      return;
    }
    const code = err instanceof SpillwayError ? err.code : 'SPW_ERR_UNKNOWN';
    const now = Date.now();
    if (now - (this.#lastWarning.get(code) ?? 0) < 5000) return;
    this.#lastWarning.set(code, now);
    process.emitWarning(err instanceof Error ? err.message : String(err), { code, type: 'SpillwayWarning' });
  }
}

function assertKey(key: unknown): asserts key is string {
  if (typeof key !== 'string') throw new InvalidArgumentError(`keys are strings, got ${typeof key}`);
}
