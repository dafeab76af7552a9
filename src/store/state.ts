import type { EventEmitter } from 'node:events';
import { SpillwayError, TierWriteError } from '../errors.js';
import { TierChain } from './chain.js';
import { newCounters } from './counters.js';
import { Accounting, Bucket, type Entry, type StoredCopy } from './entry.js';
import { RELEASE_MIN_BYTES, buffersIn, releaseBuffers } from '../runtime/buffer-release.js';
import { ReleaseCollector, collectableBytes } from '../runtime/release-collector.js';
import { MemoryLru } from './memory-lru.js';
import { garbageCollector, watchMajorCollections } from '../runtime/garbage-collection.js';
import type { ResolvedOptions } from './options.js';

/**
 * Collect once the store has let go of this fraction of its memory limit. Each forced
 * collection is an atomic pause of the loop, so fewer of them keep its delays down; the
 * fraction stays under the gap between the default `target` and `pause` levels, so RSS
 * over the target is brought back before producers would pause.
 */
const RELEASED_FRACTION = 8;

/**
 * Everything the store's parts share: the entries, the memory LRU, the accounting, the
 * tier chain, and the small state transitions that must keep them consistent. Every
 * change to an entry that can move it between buckets goes `acct.remove` → change →
 * `acct.add`, so the totals are right by construction (and checked in tests).
 */
export class StoreState {
  readonly entries = new Map<string, Entry>();
  readonly lru = new MemoryLru();
  readonly acct = new Accounting();
  readonly counters = newCounters();
  /**
   * Values whose write failed, in failure order (so in `retryAfter` order: the delay is one
   * per store), kept out of the memory LRU until their retry is due, so that one of them
   * at the LRU's head never holds up the values behind it.
   */
  readonly waiting = new Set<Entry>();
  /** The last spill write failure while writes keep failing (a full disk): cleared by the next write that lands. */
  writeFailure: Error | undefined;
  readonly chain: TierChain;
  closed = false;
  /** Hooks set by the store: memory may have grown (spill?) or shrunk (resume?). */
  onGrowth: () => void = () => undefined;
  onShrink: () => void = () => undefined;
  /** Collects what the store let go of, under memory pressure (option collectGarbage). */
  readonly collector: ReleaseCollector | undefined;
  #nextId = 0;
  /**
   * Tells when a dropped value was collected. The entry is the held value and its WeakRef
   * the unregister token: two objects per dropped value, not four (a token and a holder
   * object would cost allocation and collection time per small value).
   */
  readonly #registry = new FinalizationRegistry<Entry>((entry) => this.#collected(entry));
  readonly #lastWarning = new Map<string, number>();
  #stopWatching: (() => void) | undefined;

  constructor(
    readonly opts: ResolvedOptions,
    readonly events: EventEmitter,
  ) {
    this.chain = new TierChain(opts.tiers);
    const gc = opts.collectGarbage ? garbageCollector() : undefined;
    const collector = gc === undefined ? undefined : new ReleaseCollector(gc, opts.memoryLimit / RELEASED_FRACTION, { collectable: collectableBytes });
    this.collector = collector;
    // V8's own major collections count in the collector's ration and free what it counts.
    this.#stopWatching = collector && watchMajorCollections(collector);
  }

  /** The store closed: stop watching V8's collections. */
  dispose(): void {
    this.#stopWatching?.();
    this.#stopWatching = undefined;
  }

  /** A fresh tier id: ids are never reused, so a late write can never clobber a newer one. */
  newId(): number {
    return ++this.#nextId;
  }

  pin(entry: Entry): void {
    this.acct.remove(entry);
    entry.pins++;
    this.#unlinkMemory(entry);
    this.acct.add(entry);
  }

  unpin(entry: Entry): void {
    this.acct.remove(entry);
    entry.pins--;
    this.acct.add(entry);
    if (entry.resident && entry.copy !== undefined && entry.write === undefined && !entry.removed && this.isHeavy(entry)) {
      // A heavy value (see isHeavy) leased from below goes back to its copy, not to the LRU.
      this.drop(entry);
      this.onShrink();
      return;
    }
    this.relink(entry);
    this.onGrowth();
  }

  /**
   * Spilling cannot lower memory now: writes are failing and every resident value is pinned,
   * unencodable, or waiting to retry a failed write. Waiting for such writes would wait
   * for good while the disk stays full.
   */
  cannotSpill(): boolean {
    return this.writeFailure !== undefined && this.waiting.size > 0 && this.acct.bytes[Bucket.Spilling] === 0 && this.lru.oldest() === undefined;
  }

  /** Puts an entry back in the memory LRU if it may be evicted now. */
  relink(entry: Entry): void {
    if (
      entry.slot < 0 &&
      entry.resident &&
      !entry.removed &&
      entry.pins === 0 &&
      entry.write === undefined &&
      !entry.unspillable &&
      !(entry.retryAfter > 0 && this.waiting.has(entry))
    ) {
      this.lru.link(entry);
    }
  }

  #unlinkMemory(entry: Entry): void {
    this.lru.unlink(entry);
  }

  /** Makes `value` the resident value of an entry that was below memory; `owned`: only the store holds it (SetOptions). */
  makeResident(entry: Entry, value: unknown, owned = false): void {
    this.acct.remove(entry);
    this.#forgetWeak(entry);
    entry.resident = true;
    entry.owned = owned;
    entry.value = value;
    this.acct.add(entry);
    this.relink(entry);
    this.chain.touch(entry);
    this.onGrowth();
  }

  /** Gives an entry its copy below memory (after a spill or a move). */
  setCopy(entry: Entry, copy: StoredCopy): void {
    this.chain.unlink(entry);
    entry.copy = copy;
    this.chain.link(entry);
  }

  /**
   * Forgets a key: its value, its weak reference, and (once no reader needs it) its copy.
   * `handedOver`: the value goes to a caller who keeps it (take), not to the collector.
   */
  remove(entry: Entry, deleteCopy = true, handedOver = false): void {
    // A value dropped earlier was counted when it was dropped.
    if (entry.resident && !handedOver) this.#released(entry);
    this.acct.remove(entry);
    entry.removed = true;
    if (entry.retryAfter > 0) this.waiting.delete(entry);
    if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key);
    this.#unlinkMemory(entry);
    this.chain.unlink(entry);
    if (entry.write !== undefined) entry.write.cancelled = true;
    this.#forgetWeak(entry);
    entry.value = entry.resolved = undefined;
    if (entry.copy !== undefined && deleteCopy) this.orphan(entry.copy);
  }

  /** The copy is no longer wanted: delete it now, or when its last reader is done. */
  orphan(copy: StoredCopy): void {
    copy.orphaned = true;
    if (copy.readers === 0) this.#deleteCopy(copy);
  }

  startReading(copy: StoredCopy): void {
    copy.readers++;
  }

  doneReading(copy: StoredCopy): void {
    copy.readers--;
    if (copy.readers === 0 && copy.orphaned) this.#deleteCopy(copy);
  }

  #deleteCopy(copy: StoredCopy): void {
    const tier = this.opts.tiers[copy.tier];
    tier.delete(copy.id).catch((err: unknown) => this.report(new TierWriteError(tier.name, `#${copy.id}`, err)));
  }

  /** Drops the in-memory value of an entry that has a copy below; keeps a weak reference to one of weakRefBytes or more. */
  drop(entry: Entry): void {
    const freed = this.#released(entry);
    this.acct.remove(entry);
    this.#unlinkMemory(entry);
    // Small values are let go outright (see the weakRefBytes option); freed ones are gone.
    if (!freed && entry.size >= this.opts.weakRefBytes) this.#holdWeakly(entry, entry.value);
    entry.value = entry.resolved = undefined;
    entry.resident = false;
    this.acct.add(entry);
    this.counters.evictions++;
  }

  /**
   * A value larger than the whole target, read back: kept resident, it would push every
   * other value out before being dropped itself. The reader gets it; the store keeps only a
   * weak reference, which finds it again while the reader holds it.
   */
  isHeavy(entry: Entry): boolean {
    return entry.size > this.opts.targetBytes && entry.pins === 0;
  }

  /** A heavy value read back (see isHeavy): tracked weakly, not resident. */
  keepDetached(entry: Entry, value: unknown): void {
    if (entry.weak?.deref() === value) return;
    this.acct.remove(entry);
    this.#forgetWeak(entry);
    this.#holdWeakly(entry, value);
    this.acct.add(entry);
    this.chain.touch(entry);
  }

  #holdWeakly(entry: Entry, value: unknown): void {
    if ((typeof value === 'object' && value !== null) || typeof value === 'function') {
      const weak = new WeakRef(value);
      entry.weak = weak;
      this.#registry.register(value, entry, weak);
    }
  }

  /**
   * The store lets go of a resident value. An owned one nobody pins and no write reads is
   * freed now (true); any other's memory returns only when V8 collects.
   */
  #released(entry: Entry): boolean {
    if (typeof entry.value !== 'object' || entry.value === null) return false;
    // Freed values count too: values come and go with garbage only a collection frees (the
    // records and socket reads that carried them), and the collector runs only while RSS
    // is over the target.
    this.collector?.released(entry.size);
    if (entry.owned && entry.pins === 0 && entry.write === undefined) {
      entry.owned = false;
      this.counters.freedBytes += releaseBuffers(buffersIn(entry.value, RELEASE_MIN_BYTES));
      return true;
    }
    return false;
  }

  /** A dropped value that is still alive elsewhere comes back without I/O. */
  reattach(entry: Entry): unknown {
    const value = entry.weak?.deref();
    if (value === undefined) return undefined;
    this.counters.weakHits++;
    if (!this.isHeavy(entry)) this.makeResident(entry, value);
    return value;
  }

  #forgetWeak(entry: Entry): void {
    if (entry.weak !== undefined) this.#registry.unregister(entry.weak);
    entry.weak = undefined;
  }

  #collected(entry: Entry): void {
    // A callback for an earlier drop of this entry finds its current WeakRef's value alive
    // (dropped again since), or none at all (made resident: that registration was removed).
    if (entry.weak === undefined || entry.removed || entry.weak.deref() !== undefined) return;
    this.acct.remove(entry);
    entry.weak = undefined;
    this.acct.add(entry);
  }

  /** 'error' events when someone listens; otherwise a rate-limited process warning, never a crash; nothing once closed. */
  report(err: unknown): void {
    // A closed store says nothing more: what fails after close() failed because of it.
    if (this.closed) return;
    if (this.events.listenerCount('error') > 0) {
      this.events.emit('error', err);
      return;
    }
    const code = err instanceof SpillwayError ? err.code : 'SPW_ERR_UNKNOWN';
    const now = Date.now();
    if (now - (this.#lastWarning.get(code) ?? 0) < 5000) return;
    this.#lastWarning.set(code, now);
    process.emitWarning(err instanceof Error ? err.message : String(err), { code, type: 'SpillwayWarning' });
  }
}
