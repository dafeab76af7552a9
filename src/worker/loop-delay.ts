import { type RecordableHistogram, createHistogram, performance } from 'node:perf_hooks';

/** The monitor's tick (ms): a figure within a tick, for a fraction of what finer ticks cost. */
const TICK_MS = 10;

/** Figures of how late the ticks ran, in ms. */
export interface LoopDelayFigures {
  max: number;
  p99: number;
}

/**
 * The event loop's delay: how late each tick of a `TICK_MS` timer ran, which is how long a
 * callback due at that moment waited. An idle loop reads about 0; a block of `B` ms reads
 * between `B - TICK_MS` and `B`.
 *
 * Each tick measures itself against the previous one, so closing a window loses nothing.
 * Node's `monitorEventLoopDelay` records gaps between ticks (the tick itself included), and
 * its reset forgets the previous tick: a heartbeat that runs first after a block, in the
 * same timer phase, would reset it and lose the block.
 */
export class LoopDelayMonitor {
  /**
   * How late this window's ticks ran, and every tick's since the monitor started (ns, at
   * least 1: a histogram's floor).
   */
  readonly #window: RecordableHistogram = createHistogram();
  readonly #run: RecordableHistogram = createHistogram();
  readonly #timer: NodeJS.Timeout;
  #last = performance.now();

  constructor() {
    this.#timer = setInterval(() => this.#tick(), TICK_MS);
    this.#timer.unref();
  }

  /** This window's figures (zeros for a window without ticks); starts the next window. */
  closeWindow(): LoopDelayFigures {
    const h = this.#window;
    const figures = h.count > 0 ? { max: h.max / 1e6, p99: h.percentile(99) / 1e6 } : { max: 0, p99: 0 };
    h.reset();
    return figures;
  }

  /** The 99th percentile (ms) of every tick since the monitor started; 0 before the first. */
  get runP99(): number {
    return this.#run.count > 0 ? this.#run.percentile(99) / 1e6 : 0;
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  #tick(): void {
    const now = performance.now();
    const lateNs = Math.max(1, Math.round((now - this.#last - TICK_MS) * 1e6));
    this.#last = now;
    this.#window.record(lateNs);
    this.#run.record(lateNs);
  }
}
