import { Bucket } from './entry.js';
import { MemoryMonitor } from './monitor.js';
import type { StoreState } from './state.js';
import type { UnspillableEvent } from './stats.js';

/**
 * Memory pressure: pauses producers above `pause` (of managed bytes, or of process RSS
 * when the monitor runs) and resumes them once managed bytes are back under `resume` and
 * RSS under `target`; asks for spilling when process RSS passes `spill`. Asynchronous
 * spilling needs this backpressure, or producers outrun the disk (the lesson of zict's
 * async buffer).
 */
export class Pressure {
  #paused = false;
  #waiters: (() => void)[] = [];
  #evicting = false;
  #unmanagedReported = false;
  /** The last sample collected garbage and left spilling to this one. */
  #deferredSpill = false;
  readonly monitor: MemoryMonitor;

  constructor(
    private readonly state: StoreState,
    private readonly evict: (bytes: number) => Promise<number>,
  ) {
    this.monitor = new MemoryMonitor(state.opts.monitorIntervalMs, (rss) => this.onSample(rss));
  }

  get paused(): boolean {
    return this.#paused;
  }

  /** Resolves at once when not paused, else when the store resumes. */
  whenResumed(): Promise<void> {
    if (!this.#paused || this.state.closed) return Promise.resolve();
    // A producer waits: the monitor's next readings are what spills and resumes it.
    this.monitor.holdOpen(true);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** After resident bytes grew: pause if they passed `pause`. */
  checkPause(): void {
    if (this.state.acct.residentBytes > this.state.opts.pauseBytes && !this.#runInMemory()) this.#set(true);
  }

  /**
   * Spilling cannot help now (state.cannotSpill: a full disk) and the values still fit the
   * memory limit: producers go on in memory rather than wait on writes that cannot succeed.
   */
  #runInMemory(): boolean {
    return this.state.cannotSpill() && this.state.acct.residentBytes < this.state.opts.memoryLimit;
  }

  /**
   * After memory shrank: resume once resident values are back under `resume` and process
   * RSS under target, or spilling can no longer lower it (nothing unpinned is left in
   * memory). Waiting for RSS that only unmanaged memory holds up would stall producers
   * forever. Resident values need not wait for target: a producer that resumed only once
   * every write in flight had landed would leave the disk idle while it produced the next
   * values.
   */
  checkResume(rss = this.monitor.lastRss): void {
    if (!this.#paused) return;
    const { acct, opts } = this.state;
    if (this.#runInMemory()) return this.#set(false);
    if (acct.residentBytes > opts.resumeBytes) return;
    if (this.monitor.enabled && rss > this.#resumeAt() && this.#spillable() > 0) return;
    this.#set(false);
  }

  stop(): void {
    this.monitor.stop();
    this.#set(false);
  }

  /** RSS must be back under this to resume: the target (or pause, when target is off). */
  #resumeAt(): number {
    return Math.min(this.state.opts.targetBytes, this.state.opts.pauseBytes);
  }

  /** Resident bytes that spilling could still free (a value the codec cannot encode never goes). */
  #spillable(): number {
    const { acct } = this.state;
    return acct.bytes[Bucket.Memory] - acct.unencodableBytes + acct.bytes[Bucket.Spilling];
  }

  /** One reading of process RSS (the monitor calls it; tests may too). */
  onSample(rss: number): void {
    const { opts, closed } = this.state;
    if (closed) return;
    // Dead values may be what holds RSS up: collect them before spilling live ones. The
    // collector frees them over the next few ms, so the next sample decides on spilling —
    // but never two samples in a row: a steady stream of releases must not hold off
    // spilling for good.
    const deferred = this.#deferredSpill;
    this.#deferredSpill = false;
    // Where spilling brings the process back to: the target, or `spill` with the target off.
    const goal = Math.min(opts.targetBytes, opts.spillBytes);
    if (rss > goal && this.collect() && !deferred) {
      this.#deferredSpill = true;
      this.checkResume(rss);
      return;
    }
    const spillable = this.#spillable();
    if (rss > opts.pauseBytes) {
      if (spillable > 0 && !this.#runInMemory()) this.#set(true);
      else if (spillable === 0) this.#reportUnmanaged(rss);
    } else {
      this.#unmanagedReported = false;
    }
    // Above `spill`, or paused and not yet back under target: spill. Without the second
    // case a store paused with RSS between target and spill waited forever (nothing
    // evicted, so nothing resumed it): seen as a shuffle that stalled with both workers paused.
    const wantSpill = rss > opts.spillBytes || (this.#paused && rss > this.#resumeAt());
    if (wantSpill && spillable > 0 && !this.#evicting) {
      // Spill enough managed data to bring the process back to its goal, LRU first. One
      // round at a time: RSS only drops once the writes in flight finish.
      this.#evicting = true;
      this.evict(rss - goal)
        .catch((err: unknown) => this.state.report(err))
        .finally(() => (this.#evicting = false));
    }
    this.checkResume(rss);
  }

  /** Collects garbage if the store's collector is on, due and within its ration (or `unrationed`). */
  collect(unrationed = false): boolean {
    const { collector, counters } = this.state;
    if (collector === undefined || !collector.maybeCollect(performance.now(), unrationed)) return false;
    counters.collections++;
    counters.collectionSeconds += collector.lastDurationMs / 1000;
    return true;
  }

  /** Over the pause level with nothing left to spill: say so once, do not pause for nothing. */
  #reportUnmanaged(rss: number): void {
    if (this.#unmanagedReported) return;
    this.#unmanagedReported = true;
    const { acct, opts } = this.state;
    const event: UnspillableEvent = {
      reason: 'unmanaged',
      residentBytes: acct.residentBytes,
      targetBytes: opts.targetBytes,
      pinned: acct.get(Bucket.Pinned),
      memory: acct.get(Bucket.Memory),
      rss,
    };
    this.state.events.emit('unspillable', event);
  }

  #set(paused: boolean): void {
    if (paused === this.#paused) return;
    this.#paused = paused;
    const event = paused ? 'pause' : 'resume';
    // Reading RSS costs a /proc read: only for a listener.
    if (this.state.events.listenerCount(event) > 0) {
      this.state.events.emit(event, { residentBytes: this.state.acct.residentBytes, rss: process.memoryUsage.rss() });
    }
    if (!paused) {
      this.monitor.holdOpen(false);
      for (const resolve of this.#waiters.splice(0)) resolve();
    }
  }
}
