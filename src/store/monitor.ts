/**
 * Reads the process's resident memory every `interval` ms (cheap: one syscall) and hands
 * it to the store, which spills or pauses. The timer is unref'd, so it never keeps an idle
 * process alive, except while `holdOpen` says someone waits on what only a reading can
 * bring: a producer paused until the next reading spills, whose process would otherwise
 * exit mid-await once the writes in flight are done.
 */
export class MemoryMonitor {
  lastRss = 0;
  private timer: NodeJS.Timeout | undefined;
  #held = false;

  constructor(
    private readonly interval: number,
    private readonly onSample: (rss: number) => void,
  ) {}

  get enabled(): boolean {
    return this.interval > 0;
  }

  start(): void {
    if (!this.enabled || this.timer !== undefined) return;
    this.lastRss = process.memoryUsage.rss();
    this.timer = setInterval(() => {
      this.lastRss = process.memoryUsage.rss();
      this.onSample(this.lastRss);
    }, this.interval);
    if (!this.#held) this.timer.unref();
  }

  /** Keeps the process alive while `held` (the timer is ref'd), or not. */
  holdOpen(held: boolean): void {
    this.#held = held;
    if (held) this.timer?.ref();
    else this.timer?.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
