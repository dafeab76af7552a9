import { EventEmitter } from 'node:events';
import { sizeof } from '../codec/index.js';
import { ClosedError, InvalidArgumentError, KeyNotFoundError } from '../errors.js';
import { byteOption } from '../units.js';
import type { Tier, WriteSource } from '../tiers/tier.js';
import { type AcquireOptions, assertKey, keyError, type SetOptions } from './call-arguments.js';
import type { EncodedReadStream } from './encoded-io.js';
import { EncodedPuts } from './encoded-puts.js';
import { Entry } from './entry.js';
import { findInvariantViolations } from './invariants.js';
import { Lease } from './lease.js';
import { Loader } from './loader.js';
import { resolveOptions, type SpillStoreOptions } from './options.js';
import { Pressure } from './pressure.js';
import { openReadStream } from './read-stream.js';
import { Spiller } from './spiller.js';
import { StoreState } from './state.js';
import { type Taken, takeEntry } from './take.js';
import { buildStats, type StoreStats } from './stats.js';

/** Key of the invariant checker used by tests (not part of the public API). */
export const checkInvariants = Symbol('spillway.checkInvariants');
/** Key of a hook that feeds the memory monitor one RSS reading (tests; not public API). */
export const sampleMemory = Symbol('spillway.sampleMemory');

// Beside the class whose calls take them: src/index.ts exports them from here.
export type { AcquireOptions, SetOptions } from './call-arguments.js';

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
  /** The putEncoded calls still writing: which one a key goes to when they land. */
  readonly #puts = new EncodedPuts();
  #closing: Promise<void> | undefined;

  private constructor(options: SpillStoreOptions) {
    super();
    const state = new StoreState(resolveOptions(options), this);
    this.#state = state;
    this.#spiller = new Spiller(state);
    this.#loader = new Loader(state);
    this.#pressure = new Pressure(state, (bytes) => this.#spiller.evict(bytes));
    const onShrink = (): void => {
      this.#spiller.noteUnderTarget();
      this.#pressure.checkResume();
    };
    state.onGrowth = () => {
      this.#pressure.checkPause();
      if (state.acct.residentBytes > state.opts.targetBytes) this.#spiller.pump();
      else onShrink();
    };
    state.onShrink = onShrink;
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

  /** Resident values, or the process's RSS at the monitor's last reading, over target. */
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
    this.#puts.supersede(key);
    const old = state.entries.get(key);
    if (old !== undefined) state.remove(old);
    const entry = new Entry(key, value, size);
    if (options?.cold === true) entry.cold = true;
    if (options?.owned === true) entry.owned = true;
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
      entry.owned = false;
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
      entry.owned = false;
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
    this.#puts.supersede(key);
    const entry = this.#state.entries.get(key);
    if (entry === undefined) return false;
    this.#state.remove(entry);
    this.#state.onShrink();
    return true;
  }

  /**
   * Takes a key out: removes it and hands its value to the caller, the store keeping no
   * reference to it, strong or weak, and no spill of it still reading its memory. A value in
   * memory (or dropped after a spill but still alive) comes as it is (`alone` unless a lease
   * pins it); a spilled one comes as its encoded bytes, unchecked, read into the buffer
   * `into(byteLength)` returns (never one the store allocates): decode them with
   * `decodeVerified`. A failed read rejects and leaves the key in place.
   */
  async take(key: string, into: (byteLength: number) => Uint8Array): Promise<Taken> {
    this.#assertOpen();
    assertKey(key);
    this.#puts.supersede(key);
    const entry = this.#state.entries.get(key);
    if (entry === undefined) throw new KeyNotFoundError(key);
    return await takeEntry(this.#state, entry, into);
  }

  /**
   * Takes out a value the store holds alone in memory, for a reader that is its last (a task
   * it is handed to, memory and all): resolves to the value, the key removed, once no spill
   * of it still reads its memory; or to undefined, the key left as it is, when the value is
   * not in memory, is pinned, was handed out (`get`, `peek`, a lease that is not transient,
   * a read stream), or `accept` turns it down.
   */
  async consume(key: string, accept: (value: unknown) => boolean): Promise<unknown> {
    this.#assertOpen();
    assertKey(key);
    const entry = this.#state.entries.get(key);
    if (entry === undefined || !entry.resident || !entry.owned || entry.pins > 0 || !accept(entry.value)) return undefined;
    this.#puts.supersede(key);
    const taken = await takeEntry(this.#state, entry, () => new Uint8Array(0));
    return 'value' in taken ? taken.value : undefined;
  }

  /** Loads the keys (one read each, shared with concurrent readers) and pins them. */
  async acquire(keys: Iterable<string>, options?: AcquireOptions): Promise<Lease> {
    this.#assertOpen();
    const state = this.#state;
    // A string is iterable too: acquire('abc') would lease 'a', 'b' and 'c'.
    if (typeof keys === 'string' || typeof (keys as Partial<Iterable<string>> | null)?.[Symbol.iterator] !== 'function') {
      throw new InvalidArgumentError(`acquire takes an iterable of keys, got ${typeof keys === 'string' ? 'a string' : typeof keys}`);
    }
    const wanted = [...new Set(keys)];
    for (const key of wanted) assertKey(key);
    const entries = wanted.map((key) => state.entries.get(key) ?? fail(new KeyNotFoundError(key)));
    const transient = options?.transient === true;
    for (const entry of entries) {
      state.pin(entry);
      if (!transient) entry.owned = false;
    }
    let values: unknown[];
    try {
      values = await Promise.all(entries.map((e) => (e.resident ? e.value : this.#loader.load(e, transient))));
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
    const entry = this.#state.entries.get(key);
    if (entry === undefined) throw new KeyNotFoundError(key);
    return openReadStream(this.#state, entry);
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
    const { copy, latest } = await this.#puts.write(key, () => this.#spiller.writeEncoded(key, source, byteLength));
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
    return findInvariantViolations(this.#state);
  }

  #assertOpen(): void {
    if (this.#state.closed) throw new ClosedError();
  }
}

function fail(err: Error): never {
  throw err;
}
