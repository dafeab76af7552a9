import type { ClusterState } from '../cluster/protocol.js';
import type { LocalCluster } from './local-cluster.js';

/** What one worker did over a run: peaks, and its cumulative counters at the end. */
export interface WorkerRunStats {
  name: string;
  pid: number;
  memoryLimit: number;
  /** Highest resident memory of the process: the kernel's high-water mark (VmHWM) where readable, else the highest heartbeat RSS. */
  peakRss: number;
  peakRssSource: 'proc' | 'heartbeat';
  /** RSS in the latest heartbeat. */
  rss: number;
  /** Highest RSS any heartbeat reported. */
  peakHeartbeatRss: number;
  spilledBytes: number;
  unspilledBytes: number;
  /** Most bytes its store held below memory (on disk) at any heartbeat. */
  peakDiskBytes: number;
  servedFromDiskBytes: number;
  servedFromMemoryBytes: number;
  maxEventLoopDelayMs: number;
  /** 99th percentile of the event-loop delays over the run (the worker's latest heartbeat). */
  p99EventLoopDelayMs: number;
  /** Seconds its event loop's thread ran on a core, and waited ready for one, since it started (its latest heartbeat); null where the system does not say (Linux does). */
  loopRunSeconds: number | null;
  loopWaitSeconds: number | null;
  /** Polls that found a heartbeat of this worker. */
  samples: number;
  /** False while no process of it runs (killed, and not yet or never restarted). */
  alive: boolean;
  /** Times the supervisor started it again. */
  restarts: number;
}

export interface ClusterSample {
  tasks: { done: number; total: number; erred: number };
  workers: WorkerRunStats[];
}

/**
 * Polls a LocalCluster's /api/state (the workers' heartbeats) and the workers' /proc
 * status, and keeps each worker's peaks: a heartbeat only shows one instant, the
 * kernel's high-water mark shows the true peak of the process.
 */
export class ClusterMonitor {
  readonly #cluster: LocalCluster;
  readonly #workers: WorkerRunStats[];
  #tasks = { done: 0, total: 0, erred: 0 };
  #timer: NodeJS.Timeout | undefined;
  #polling: Promise<void> | undefined;
  #errors = 0;

  constructor(cluster: LocalCluster) {
    this.#cluster = cluster;
    this.#workers = cluster.workerInfo.map((w, i) => ({
      name: `worker-${i}`,
      pid: w.pid,
      memoryLimit: cluster.memoryLimit,
      peakRss: 0,
      peakRssSource: 'heartbeat',
      rss: 0,
      peakHeartbeatRss: 0,
      spilledBytes: 0,
      unspilledBytes: 0,
      peakDiskBytes: 0,
      servedFromDiskBytes: 0,
      servedFromMemoryBytes: 0,
      maxEventLoopDelayMs: 0,
      p99EventLoopDelayMs: 0,
      loopRunSeconds: null,
      loopWaitSeconds: null,
      samples: 0,
      alive: true,
      restarts: 0,
    }));
  }

  /** Polls every `intervalMs`, calling `onSample` after each poll. */
  start(intervalMs: number, onSample?: (sample: ClusterSample) => void): void {
    const tick = (): void => {
      this.#polling = this.poll().then(() => {
        onSample?.(this.sample());
        if (this.#timer !== undefined) this.#timer = setTimeout(tick, intervalMs);
      });
    };
    this.#timer = setTimeout(tick, 0);
  }

  async stop(): Promise<ClusterSample> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#polling;
    await this.poll();
    return this.sample();
  }

  /** Polls that failed (the scheduler busy or gone); the figures are from the others. */
  get failedPolls(): number {
    return this.#errors;
  }

  sample(): ClusterSample {
    return { tasks: { ...this.#tasks }, workers: this.#workers.map((w) => ({ ...w })) };
  }

  async poll(): Promise<void> {
    const [state, memory] = await Promise.all([
      this.#cluster.state().catch(() => undefined),
      this.#cluster.workerMemory(),
    ]);
    // Alive from the process itself: memory() is undefined off Linux (no /proc) or when a read fails.
    const running = this.#cluster.workersRunning;
    const supervised = this.#cluster.supervisor.workers;
    memory.forEach((m, i) => {
      const w = this.#workers[i];
      w.alive = running[i];
      w.pid = supervised[i].pid;
      w.restarts = supervised[i].restarts;
      if (m === undefined) return;
      if (m.peakRss >= w.peakRss) {
        w.peakRss = m.peakRss;
        w.peakRssSource = 'proc';
      }
    });
    if (state === undefined) {
      this.#errors++;
      return;
    }
    this.#absorb(state);
  }

  #absorb(state: ClusterState): void {
    const t = state.tasks;
    const total = t.total ?? 0;
    const pending = (t.waiting ?? 0) + (t.ready ?? 0) + (t.processing ?? 0);
    // The client releases its keys at the end and the scheduler forgets them: keep the high marks.
    this.#tasks = {
      done: Math.max(this.#tasks.done, total - pending),
      total: Math.max(this.#tasks.total, total),
      erred: Math.max(this.#tasks.erred, t.erred ?? 0),
    };
    for (const worker of state.workers) {
      const w = this.#workers.find((x) => x.pid === worker.pid);
      const beat = worker.lastHeartbeat;
      if (w === undefined || beat === null) continue;
      w.name = worker.name;
      w.samples++;
      w.rss = beat.rss;
      w.peakHeartbeatRss = Math.max(w.peakHeartbeatRss, beat.rss);
      w.peakDiskBytes = Math.max(w.peakDiskBytes, beat.disk?.bytes ?? 0);
      if (w.peakRssSource === 'heartbeat') w.peakRss = Math.max(w.peakRss, beat.rss);
      w.maxEventLoopDelayMs = Math.max(w.maxEventLoopDelayMs, beat.eventLoopDelayMs);
      if (beat.eventLoopDelayRunP99Ms !== undefined) w.p99EventLoopDelayMs = beat.eventLoopDelayRunP99Ms;
      if (typeof beat.loopRunSeconds === 'number') w.loopRunSeconds = beat.loopRunSeconds;
      if (typeof beat.loopWaitSeconds === 'number') w.loopWaitSeconds = beat.loopWaitSeconds;
      // Cumulative counters: the latest is the largest.
      w.spilledBytes = Math.max(w.spilledBytes, beat.spilledBytes);
      w.unspilledBytes = Math.max(w.unspilledBytes, beat.unspilledBytes);
      w.servedFromDiskBytes = Math.max(w.servedFromDiskBytes, beat.servedFromDiskBytes);
      w.servedFromMemoryBytes = Math.max(w.servedFromMemoryBytes, beat.servedFromMemoryBytes);
    }
  }
}
