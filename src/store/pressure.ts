import { MemoryMonitor } from './monitor.js';
import type { StoreState } from './state.js';

/**
 * Memory pressure: pauses producers above `pause` (of managed bytes, or of process RSS
 * when the monitor runs) and resumes them once both are back under `target`; asks for
 * spilling when process RSS passes `spill`. Asynchronous spilling needs this backpressure,
 * or producers outrun the disk (the lesson of zict's async buffer).
 */
export class Pressure {
  #paused = false;
  #waiters: (() => void)[] = [];
  #evicting = false;
  readonly monitor: MemoryMonitor;

  constructor(
    private readonly state: StoreState,
    private readonly evict: (bytes: number) => Promise<number>,
  ) {
    this.monitor = new MemoryMonitor(state.opts.monitorInterval, (rss) => this.#onSample(rss));
  }

  get paused(): boolean {
    return this.#paused;
  }

  /** Resolves at once when not paused, else when the store resumes. */
  whenResumed(): Promise<void> {
    if (!this.#paused || this.state.closed) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** After resident bytes grew: pause if they passed `pause`. */
  checkPause(): void {
    if (this.state.acct.residentBytes > this.state.opts.pauseBytes) this.#set(true);
  }

  /** After resident bytes shrank: resume if memory is back under target. */
  checkResume(rss = this.monitor.lastRss): void {
    if (!this.#paused) return;
    const { opts, acct } = this.state;
    const resumeAt = Math.min(opts.targetBytes, opts.pauseBytes);
    if (acct.residentBytes > resumeAt) return;
    if (this.monitor.enabled && rss > resumeAt) return;
    this.#set(false);
  }

  stop(): void {
    this.monitor.stop();
    this.#set(false);
  }

  #onSample(rss: number): void {
    const { opts, closed } = this.state;
    if (closed) return;
    if (rss > opts.pauseBytes) this.#set(true);
    if (rss > opts.spillBytes && !this.#evicting) {
      // Spill enough managed data to bring the process back to target, LRU first. One
      // round at a time: RSS only drops once the writes in flight finish.
      this.#evicting = true;
      this.evict(rss - opts.targetBytes)
        .catch((err: unknown) => this.state.report(err))
        .finally(() => (this.#evicting = false));
    }
    this.checkResume(rss);
  }

  #set(paused: boolean): void {
    if (paused === this.#paused) return;
    this.#paused = paused;
    const info = { residentBytes: this.state.acct.residentBytes, rss: this.monitor.lastRss };
    this.state.events.emit(paused ? 'pause' : 'resume', info);
    if (!paused) for (const resolve of this.#waiters.splice(0)) resolve();
  }
}
