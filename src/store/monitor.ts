/**
 * Reads the process's resident memory every `interval` ms (cheap: one syscall) and hands
 * it to the store, which spills or pauses. The timer is unref'd: it never keeps a process alive.
 */
export class MemoryMonitor {
  lastRss = 0;
  private timer: NodeJS.Timeout | undefined;

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
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
