import { CodecError, SpillCapError, SpillwayError, TierWriteError, TiersFullError } from '../errors.js';
import type { Demoter } from './demoter.js';
import type { Entry, StoredCopy, WriteJob } from './entry.js';
import type { StoreState } from './state.js';

/** What starts more writes: told when values that failed to write are due for a retry. */
export interface SpillPump {
  pump(): void;
}

/**
 * Ends each value's write, single or batched, the same way: it gets its copy (and leaves
 * memory if memory is over target or the write was forced), or it stays in memory, its
 * failure reported and its retry timed. Nothing is lost.
 */
export class WriteEndings {
  /**
   * Writes with an id up to this one drop their value once written, whatever the memory
   * level: an evict() that wanted more than the LRU held forced the writes then in flight.
   */
  #forceUpTo = 0;
  /** Bytes dropped by writes #forceUpTo forced (what those evict() calls report). */
  #forcedBytes = 0;
  #retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly state: StoreState,
    private readonly demoter: Demoter,
    private readonly pump: SpillPump,
  ) {}

  /** Bytes dropped so far by writes that forceWritesUpTo forced. */
  get forcedBytes(): number {
    return this.#forcedBytes;
  }

  /** The writes in flight up to `id` drop their value once written (evict()). */
  forceWritesUpTo(id: number): void {
    this.#forceUpTo = id;
  }

  /**
   * Ends an entry's write: gives it its copy (and drops the value if memory is over target
   * or the write was forced), or keeps it in memory and reports the failure. With `quiet`
   * the caller does the per-tier and memory follow-ups once for many. Returns bytes freed.
   */
  finish(entry: Entry, job: WriteJob, copy: StoredCopy | undefined, failure: unknown, tierName: string, quiet: boolean): number {
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
    if (!quiet) this.demoter.afterTierWrite(copy.tier);
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
      // Still the same episode (the pump's report resets once memory is back under target):
      // a retry that fails again must not report it again, every retry of every value.
      this.pump.pump();
    }, Math.max(1, first.retryAfter - performance.now()));
    this.#retryTimer.unref();
  }

  stop(): void {
    clearTimeout(this.#retryTimer);
  }
}
