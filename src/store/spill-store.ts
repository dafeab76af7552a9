import { EventEmitter } from 'node:events';
import { encode, sizeof } from '../codec/index.js';
import { ClosedError, InvalidArgumentError, KeyNotFoundError } from '../errors.js';
import { byteOption } from '../units.js';
import type { Tier, WriteSource } from '../tiers/tier.js';
import { asEncodedStream, memoryStream, type EncodedReadStream } from './encoded-io.js';
import { Accounting, Bucket, Entry, type StoredCopy } from './entry.js';
import { Lease } from './lease.js';
import { Loader } from './loader.js';
import { resolveOptions, type SpillStoreOptions } from './options.js';
import { Pressure } from './pressure.js';
import { Spiller } from './spiller.js';
import { StoreState } from './state.js';
import { buildStats, type StoreStats } from './stats.js';

/** Key of the invariant checker used by tests (not part of the public API). */
export const checkInvariants = Symbol('spillway.checkInvariants');
/** Key of a hook that feeds the memory monitor one RSS reading (tests; not public API). */
export const sampleMemory = Symbol('spillway.sampleMemory');

export interface SetOptions {
  /** In-memory size (bytes, or a string like '3 MiB'), when you know it better than the estimate. */
  size?: number | string;
}

/**
 * A memory-bounded key-value store that spills to a chain of tiers (disk by default).
 * Disk work is always asynchronous; a key has at most one in-memory copy; spilled values
 * stay in their encoded form, ready to stream to peers. See docs/architecture.md.
 *
 * Events: 'pause' and 'resume' (backpressure), 'unspillable' (over target and nothing
 * can be spilled, with the reason), 'error' (a failed spill or read; no data is lost).
 */
export class SpillStore extends EventEmitter {
  readonly #state: StoreState;
  readonly #spiller: Spiller;
  readonly #loader: Loader;
  readonly #pressure: Pressure;
  /**
   * The latest putEncoded call of each key still writing. A set, delete or later
   * putEncoded of the key replaces or removes its token: the earlier write then lands
   * nowhere (its copy is deleted), as if it had taken effect when it was called. A later
   * putEncoded that fails changed nothing: it hands the key back to the earlier call.
   */
  readonly #puts = new Map<string, PutToken>();
  #closing: Promise<void> | undefined;

  private constructor(options: SpillStoreOptions) {
    super();
    const state = new StoreState(resolveOptions(options), this);
    this.#state = state;
    this.#spiller = new Spiller(state);
    this.#loader = new Loader(state);
    this.#pressure = new Pressure(state, (bytes) => this.#spiller.evict(bytes));
    state.onGrowth = () => {
      this.#pressure.checkPause();
      if (state.acct.residentBytes > state.opts.targetBytes) this.#spiller.pump();
      else this.#pressure.checkResume();
    };
    state.onShrink = () => this.#pressure.checkResume();
  }

  /** Opens a store: prepares its tiers (a fresh spill folder) and starts the memory monitor. */
  static async open(options: SpillStoreOptions = {}): Promise<SpillStore> {
    const store = new SpillStore(options);
    const opened: Tier[] = [];
    try {
      for (const tier of store.#state.opts.tiers) {
        await tier.open();
        opened.push(tier);
      }
    } catch (err) {
      // The state may already watch V8's collections (collectGarbage): stop, or it never will.
      store.#state.dispose();
      await Promise.allSettled(opened.map((t) => t.close()));
      throw err;
    }
    store.#pressure.monitor.start();
    return store;
  }

  get memoryLimit(): number {
    return this.#state.opts.memoryLimit;
  }
  get targetBytes(): number {
    return this.#state.opts.targetBytes;
  }
  /** Memory level (bytes) above which producers are paused; Infinity when `pause` is off. */
  get pauseBytes(): number {
    return this.#state.opts.pauseBytes;
  }
  /** Memory level (bytes) under which a paused store's values must be back before it resumes. */
  get resumeBytes(): number {
    return this.#state.opts.resumeBytes;
  }
  get paused(): boolean {
    return this.#pressure.paused;
  }
  get closed(): boolean {
    return this.#state.closed;
  }
  get size(): number {
    return this.#state.entries.size;
  }
  get tiers(): readonly Tier[] {
    return this.#state.opts.tiers;
  }
  keys(): IterableIterator<string> {
    return this.#state.entries.keys();
  }
  /** Bytes held strongly in memory (unpinned, being spilled, pinned). */
  get residentBytes(): number {
    return this.#state.acct.residentBytes;
  }
  isAboveTarget(): boolean {
    return this.#state.acct.residentBytes > this.#state.opts.targetBytes;
  }
  /** Resident values, or the process's RSS at the monitor's last reading, over target. */
  /**
   * The last spill write failure (a full disk: `TierWriteError` with ENOSPC, `TiersFullError`,
   * `SpillCapError`) while writes keep failing; undefined once a write lands again.
   */
  get writeFailure(): Error | undefined {
    return this.#state.writeFailure;
  }

  /** Writes are failing and nothing else could be spilled now: memory can only go down by deleting. */
  get cannotSpill(): boolean {
    return this.#state.cannotSpill();
  }

  isProcessAboveTarget(): boolean {
    return this.isAboveTarget() || this.#pressure.monitor.lastRss > this.#state.opts.targetBytes;
  }

  /** Stores a value in memory. Synchronous, no I/O: spilling happens in the background. */
  set(key: string, value: unknown, options?: SetOptions): void {
    this.#assertOpen();
    assertKey(key);
    const size = byteOption(options?.size, 'size') ?? sizeof(value);
    if (typeof size !== 'number' || !Number.isFinite(size) || size < 0) {
      throw new InvalidArgumentError(`size must be a non-negative number of bytes, got ${String(options?.size)}`);
    }
    const state = this.#state;
    if (this.#puts.size > 0) this.#puts.delete(key);
    const old = state.entries.get(key);
    if (old !== undefined) state.remove(old);
    const entry = new Entry(key, value, size);
    state.entries.set(key, entry);
    state.acct.add(entry);
    if (size > state.opts.targetBytes) {
      // Larger than the whole target: it would only push everything else out. Straight down.
      void this.#spiller.spill(entry, true);
    } else {
      state.relink(entry);
    }
    state.onGrowth();
  }

  /** The value; resolves without I/O when it is in memory. Rejects KeyNotFoundError. */
  get(key: string): Promise<unknown> {
    if (this.#state.closed) return Promise.reject(new ClosedError());
    if (typeof key !== 'string') return Promise.reject(keyError(key));
    const entry = this.#state.entries.get(key);
    if (entry === undefined) return Promise.reject(new KeyNotFoundError(key));
    if (entry.resident) {
      this.#state.lru.touch(entry);
      return (entry.resolved ??= Promise.resolve(entry.value));
    }
    return this.#loader.load(entry);
  }

  /** The value if it is in memory (never any I/O), else undefined. */
  peek(key: string): unknown {
    const entry = this.#state.entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.resident) {
      this.#state.lru.touch(entry);
      return entry.value;
    }
    return this.#state.reattach(entry);
  }

  has(key: string): boolean {
    return this.#state.entries.has(key);
  }

  /**
   * 'memory' while the store holds the value, else the name of the tier holding it, or
   * undefined if the key is absent. A dropped value still alive elsewhere reports its tier
   * (the store no longer holds it; `stats().detached` counts it); reading it needs no I/O.
   */
  where(key: string): string | undefined {
    const entry = this.#state.entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.resident || entry.copy === undefined) return 'memory';
    return this.#state.opts.tiers[entry.copy.tier].name;
  }

  /** Removes a key now; its copy below memory is removed in the background. */
  delete(key: string): boolean {
    // A putEncoded of the key still writing must not bring it back afterwards.
    if (this.#puts.size > 0) this.#puts.delete(key);
    const entry = this.#state.entries.get(key);
    if (entry === undefined) return false;
    this.#state.remove(entry);
    this.#state.onShrink();
    return true;
  }

  /** Loads the keys (one read each, shared with concurrent readers) and pins them. */
  async acquire(keys: Iterable<string>): Promise<Lease> {
    this.#assertOpen();
    const state = this.#state;
    // A string is iterable too: acquire('abc') would lease 'a', 'b' and 'c'.
    if (typeof keys === 'string' || typeof (keys as Partial<Iterable<string>> | null)?.[Symbol.iterator] !== 'function') {
      throw new InvalidArgumentError(`acquire takes an iterable of keys, got ${typeof keys === 'string' ? 'a string' : typeof keys}`);
    }
    const wanted = [...new Set(keys)];
    for (const key of wanted) assertKey(key);
    const entries = wanted.map((key) => state.entries.get(key) ?? fail(new KeyNotFoundError(key)));
    for (const entry of entries) state.pin(entry);
    let values: unknown[];
    try {
      values = await Promise.all(entries.map((e) => (e.resident ? e.value : this.#loader.load(e))));
    } catch (err) {
      for (const entry of entries) state.unpin(entry);
      throw err;
    }
    return new Lease(new Map(wanted.map((key, i) => [key, values[i]])), () => {
      for (const entry of entries) state.unpin(entry);
    });
  }

  /**
   * The encoded bytes of a value: from memory (encoded from the value's own memory) or
   * straight from its tier without decoding. The value stays put until the stream closes.
   */
  createReadStream(key: string): EncodedReadStream {
    this.#assertOpen();
    assertKey(key);
    const state = this.#state;
    const entry = state.entries.get(key);
    if (entry === undefined) throw new KeyNotFoundError(key);
    if (entry.resident || entry.copy === undefined) {
      const encoded = encode(entry.value);
      state.pin(entry);
      const stream = memoryStream(encoded);
      stream.once('close', () => state.unpin(entry));
      state.counters.streamedFromMemoryBytes += encoded.byteLength;
      return asEncodedStream(stream, encoded.byteLength, 'memory');
    }
    const copy = entry.copy;
    const tier = state.opts.tiers[copy.tier];
    state.startReading(copy);
    const stream = tier.createReadStream(copy.id);
    stream.once('close', () => state.doneReading(copy));
    state.counters.streamedFromTierBytes += copy.bytes;
    return asEncodedStream(stream, copy.bytes, tier.name);
  }

  /**
   * Stores already-encoded bytes (from a peer) straight into the first tier with room,
   * without decoding them; layout and checksum are verified on the way and nothing is
   * stored on a mismatch (an existing value under the key is then left as it was). It takes
   * effect as of the call: a `set`, `delete` or `putEncoded` of the key made while it writes
   * wins, and this one's bytes are discarded (a later `putEncoded` that fails changes nothing:
   * this one then resolves once that one has failed, and lands).
   */
  async putEncoded(key: string, source: Uint8Array | WriteSource, byteLength: number): Promise<void> {
    this.#assertOpen();
    assertKey(key);
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) throw new InvalidArgumentError('byteLength must be a whole number of bytes');
    const puts = this.#puts;
    let settle!: () => void;
    const token: PutToken = { prev: puts.get(key), live: true, settled: new Promise<void>((resolve) => (settle = resolve)) };
    puts.set(key, token);
    let copy: StoredCopy;
    let latest: boolean;
    try {
      try {
        copy = await this.#spiller.writeEncoded(key, source, byteLength);
      } catch (err) {
        // Failed: nothing changed. The latest earlier call still live takes the key back.
        token.live = false;
        if (puts.get(key) === token) {
          let back = token.prev;
          while (back !== undefined && !back.live) back = back.prev;
          if (back === undefined) puts.delete(key);
          else puts.set(key, back);
        }
        throw err;
      }
      // A later putEncoded still writing may yet fail and hand the key back: wait for it.
      for (let current = puts.get(key); current !== undefined && current !== token; current = puts.get(key)) await current.settled;
      latest = puts.get(key) === token;
      token.live = false;
      if (latest) puts.delete(key);
    } finally {
      settle();
    }
    const state = this.#state;
    if (state.closed || !latest) {
      // Closed, or the key was set, deleted or put again since this call: nothing to keep.
      state.orphan(copy);
      if (state.closed) throw new ClosedError();
      return;
    }
    const old = state.entries.get(key);
    if (old !== undefined) state.remove(old);
    const entry = new Entry(key, undefined, byteLength);
    entry.resident = false;
    state.entries.set(key, entry);
    state.setCopy(entry, copy);
    state.onShrink();
  }

  /** Spills now, least recently used first, until `bytes` are out of memory (default: all it can). Resolves to the bytes evicted. */
  async evict(bytes = Infinity): Promise<number> {
    this.#assertOpen();
    // NaN compared false with every total and evicted everything.
    if (typeof bytes !== 'number' || !(bytes >= 0)) throw new InvalidArgumentError(`evict takes a non-negative number of bytes, got ${String(bytes)}`);
    return this.#spiller.evict(bytes);
  }

  /**
   * Runs the garbage collector if the store has let go of enough values since the last
   * collection (option `collectGarbage`) and its ration allows; `unrationed` skips the
   * ration, for a caller about to need the memory. True when it ran.
   */
  collectGarbage(unrationed = false): boolean {
    this.#assertOpen();
    return this.#pressure.collect(unrationed);
  }

  /** Resolves when no write is in flight. */
  flush(): Promise<void> {
    return this.#spiller.flush();
  }

  /** Resolves at once when not paused, else when the store resumes. Await it between `set`s to respect backpressure. */
  whenResumed(): Promise<void> {
    return this.#pressure.whenResumed();
  }

  stats(): StoreStats {
    const state = this.#state;
    return buildStats({
      acct: state.acct,
      counters: state.counters,
      tiers: state.chain.stats(),
      paused: this.#pressure.paused,
      keys: state.entries.size,
      memoryLimit: state.opts.memoryLimit,
      targetBytes: state.opts.targetBytes,
    });
  }

  /** Stops the monitor, waits for writes in flight, removes every file the store wrote. */
  close(): Promise<void> {
    // A second caller waits for the same close, not for nothing.
    return (this.#closing ??= this.#close());
  }

  async #close(): Promise<void> {
    const state = this.#state;
    state.closed = true;
    this.#spiller.stop();
    this.#pressure.stop();
    state.dispose();
    await this.#spiller.flush();
    for (const entry of state.entries.values()) state.remove(entry, false);
    state.entries.clear();
    await Promise.allSettled(state.opts.tiers.map((t) => t.close()));
  }

  [sampleMemory](rss: number): void {
    this.#pressure.onSample(rss);
  }

  /** Recomputes every bucket and link from scratch; returns the violations found (none expected). For tests. */
  [checkInvariants](): string[] {
    const state = this.#state;
    const problems: string[] = [];
    const fresh = new Accounting();
    const linked = state.chain.lrus.map(() => 0);
    for (const [key, entry] of state.entries) {
      fresh.add(entry);
      const name = JSON.stringify(key.slice(0, 40));
      if (entry.key !== key || entry.removed) problems.push(`${name}: stale entry in the map`);
      const evictable = entry.resident && entry.pins === 0 && entry.write === undefined && !entry.unspillable && !state.waiting.has(entry);
      if (evictable !== entry.slot >= 0) problems.push(`${name}: LRU link ${entry.slot} but evictable=${evictable}`);
      if (!entry.resident && entry.copy === undefined) problems.push(`${name}: neither in memory nor below`);
      if (entry.resident && entry.detached) problems.push(`${name}: resident and detached`);
      if (entry.pins < 0 || (entry.copy?.readers ?? 0) < 0) problems.push(`${name}: negative pins or readers`);
      if ((entry.copy !== undefined) !== entry.copySlot >= 0) problems.push(`${name}: tier LRU link does not match its copy`);
      if (entry.copy !== undefined) linked[entry.copy.tier]++;
    }
    for (const b of [Bucket.Memory, Bucket.Spilling, Bucket.Pinned, Bucket.Detached]) {
      if (fresh.counts[b] !== state.acct.counts[b] || Math.abs(fresh.bytes[b] - state.acct.bytes[b]) > 1e-6) {
        problems.push(`bucket ${b}: counted ${state.acct.counts[b]}/${state.acct.bytes[b]}, actual ${fresh.counts[b]}/${fresh.bytes[b]}`);
      }
    }
    if (Math.abs(fresh.unencodableBytes - state.acct.unencodableBytes) > 1e-6) {
      problems.push(`unencodable bytes: counted ${state.acct.unencodableBytes}, actual ${fresh.unencodableBytes}`);
    }
    if (state.lru.size !== [...state.lru.fromOldest()].length) problems.push('memory LRU size does not match its links');
    state.chain.lrus.forEach((lru, t) => {
      if (lru.size !== linked[t]) problems.push(`tier ${t} LRU holds ${lru.size}, entries with copies there: ${linked[t]}`);
    });
    return problems;
  }

  #assertOpen(): void {
    if (this.#state.closed) throw new ClosedError();
  }
}

function assertKey(key: unknown): asserts key is string {
  if (typeof key !== 'string') throw keyError(key);
}

function keyError(key: unknown): InvalidArgumentError {
  return new InvalidArgumentError(`keys are strings, got ${key === null ? 'null' : typeof key}`);
}

function fail(err: Error): never {
  throw err;
}

/** One putEncoded call of a key (see SpillStore.#puts). */
interface PutToken {
  /** The call it superseded, if that one was still writing then. */
  readonly prev: PutToken | undefined;
  /** Neither failed nor settled: it may still take the key. */
  live: boolean;
  /** Resolves once it has failed, landed or been discarded. */
  readonly settled: Promise<void>;
}
