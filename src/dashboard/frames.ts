import type { WorkerHeartbeat } from '../cluster/protocol.js';
import { figure, memoryParts } from '../metrics/memory-parts.js';
import type { SchedulerState, WorkerSnapshot } from '../scheduler/snapshot.js';
import type { TaskStream, TaskStreamEntry } from '../scheduler/task-stream.js';

/** One worker in a dashboard frame. Bytes, bytes per second, milliseconds. */
export interface WorkerFrame {
  name: string;
  id: string;
  /** `lost`: gone without saying so (killed, or silent past the timeout); `closed`: left on purpose. */
  state: 'starting' | 'running' | 'paused' | 'closing' | 'lost' | 'closed';
  /** Date.now() when it was found gone. */
  goneAt?: number;
  nthreads: number;
  memoryLimit: number;
  pauseBytes: number | null;
  rss: number;
  managed: number;
  pinned: number;
  detached: number;
  unmanaged: number;
  spilled: number;
  diskFree: number | null;
  delayMaxMs: number;
  delayP99Ms: number;
  /**
   * Shares (0 to 1) of the time between its last two heartbeats its event loop's thread ran
   * on a core, and was ready to run but waited for one (the kernel's schedstat, Linux); null
   * where the worker does not report them, and until two heartbeats have.
   */
  loopRunShare: number | null;
  loopWaitShare: number | null;
  executing: number;
  queued: number;
  processing: number;
  keys: number;
  lastSeenMsAgo: number;
  rates: Rates;
}

export interface Rates {
  spillWrite: number;
  spillRead: number;
  sent: number;
  received: number;
}

export interface Frame {
  t: number;
  intervalMs: number;
  heartbeatIntervalMs: number;
  workerTimeoutMs: number;
  scheduler: string;
  tasks: Record<string, number>;
  /** Tasks no longer pending (in memory, released after use, erred) out of all known. */
  progress: { done: number; total: number };
  clients: number;
  counters: Record<string, number>;
  workers: WorkerFrame[];
  rates: Rates & { tasks: number };
  /** Tasks finished since the previous frame (the newest ones when there are many). */
  stream: TaskStreamEntry[];
}

/** Memory over time per worker: [t, rss, managed + pinned + detached, spilled] tuples, oldest first. */
export type History = Record<string, Array<[number, number, number, number]>>;

export interface FrameOptions {
  intervalMs: number;
  heartbeatIntervalMs: number;
  workerTimeoutMs: number;
  /** How long the memory history reaches back, and how long gone workers stay listed (ms). */
  historyMs: number;
  /** Tasks in one frame's stream at most. */
  streamPerFrame: number;
}

type LoopShares = Pick<WorkerFrame, 'loopRunShare' | 'loopWaitShare'>;

interface Previous {
  /** The heartbeat these figures came from, and the rates and loop shares it gave. */
  hb: WorkerHeartbeat;
  rates: Rates;
  loop: LoopShares;
  at: number;
  spillWrite: number;
  spillRead: number;
  sent: number;
  received: number;
}

const TASK_RATE_WINDOW_MS = 5000;

const ZERO_RATES: Rates = { spillWrite: 0, spillRead: 0, sent: 0, received: 0 };

const NO_LOOP: LoopShares = { loopRunShare: null, loopWaitShare: null };

/**
 * Turns the scheduler's state into the dashboard's frames: memory parts that add up to
 * RSS, rates from the workers' cumulative counters, workers that left (kept, marked lost
 * or closed, for `historyMs`), a memory history of each worker, and the task stream since
 * the previous frame. One instance per scheduler; `next()` is called once per interval.
 */
export class FrameBuilder {
  readonly #history = new Map<string, Array<[number, number, number, number]>>();
  readonly #previous = new Map<string, Previous>();
  readonly #gone = new Map<string, WorkerFrame>();
  #last: Frame | undefined;
  #lastHistoryAt = 0;
  #seq = 0;
  /** Finished-task counts of the last few seconds, for a rate that does not flicker with each frame. */
  readonly #finished: Array<{ at: number; finished: number }> = [];

  constructor(
    private readonly options: FrameOptions,
    private readonly state: () => SchedulerState,
    private readonly stream: TaskStream,
  ) {}

  /** The latest frame, built now if there is none yet. */
  get last(): Frame {
    return this.#last ?? this.next();
  }

  next(): Frame {
    const now = Date.now();
    const state = this.state();
    const present = new Set<string>();
    const workers: WorkerFrame[] = [];
    for (const w of state.workers) {
      present.add(w.name);
      this.#gone.delete(w.name);
      workers.push(this.#worker(w, now));
    }
    // Workers in the previous frame and no longer here: closing ones closed, the others were lost.
    for (const prev of this.#last?.workers ?? []) {
      if (present.has(prev.name) || this.#gone.has(prev.name) || prev.state === 'lost' || prev.state === 'closed') continue;
      this.#gone.set(prev.name, { ...prev, state: prev.state === 'closing' ? 'closed' : 'lost', goneAt: now, executing: 0, queued: 0, processing: 0, rates: ZERO_RATES, ...NO_LOOP });
      this.#previous.delete(prev.name);
    }
    for (const [name, gone] of this.#gone) {
      if (now - (gone.goneAt ?? now) > this.options.historyMs) {
        this.#gone.delete(name);
        this.#history.delete(name);
      } else {
        workers.push(gone);
      }
    }
    this.#record(now, workers);
    const tasks = state.tasks as unknown as Record<string, number>;
    const pending = (tasks.waiting ?? 0) + (tasks.ready ?? 0) + (tasks.processing ?? 0);
    const finished = state.counters.tasksFinished;
    this.#finished.push({ at: now, finished });
    while (this.#finished.length > 2 && now - this.#finished[1].at >= TASK_RATE_WINDOW_MS) this.#finished.shift();
    const oldest = this.#finished[0];
    const taskRate = now > oldest.at ? (finished - oldest.finished) / ((now - oldest.at) / 1000) : 0;
    const stream = this.stream.since(this.#seq, this.options.streamPerFrame);
    this.#seq = this.stream.seq;
    const rates = { ...ZERO_RATES, tasks: taskRate };
    for (const w of workers) for (const k of Object.keys(ZERO_RATES) as (keyof Rates)[]) rates[k] += w.rates[k];
    this.#last = {
      t: now,
      intervalMs: this.options.intervalMs,
      heartbeatIntervalMs: this.options.heartbeatIntervalMs,
      workerTimeoutMs: this.options.workerTimeoutMs,
      scheduler: `${state.address.host}:${state.address.port}`,
      tasks,
      progress: { done: tasks.total - pending, total: tasks.total },
      clients: state.clients.length,
      counters: { ...state.counters },
      workers,
      rates,
      stream,
    };
    return this.#last;
  }

  /** The memory history of every worker listed now. */
  history(): History {
    return Object.fromEntries(this.#history);
  }

  #worker(w: WorkerSnapshot, now: number): WorkerFrame {
    const hb: WorkerHeartbeat | null = w.lastHeartbeat;
    const parts = hb === null ? { managed: 0, pinned: 0, detached: 0, unmanaged: 0, rss: 0 } : memoryParts(hb);
    const since = hb === null ? undefined : this.#since(w.name, hb, now - (w.lastHeartbeatMsAgo ?? 0));
    const state: WorkerFrame['state'] = w.closing ? 'closing' : hb === null ? 'starting' : hb.paused === true ? 'paused' : 'running';
    return {
      name: w.name,
      id: w.id,
      state,
      nthreads: w.nthreads,
      memoryLimit: w.memoryLimit,
      pauseBytes: typeof hb?.pauseBytes === 'number' ? hb.pauseBytes : null,
      ...parts,
      spilled: figure(hb?.disk?.bytes),
      diskFree: typeof hb?.diskFreeBytes === 'number' ? hb.diskFreeBytes : null,
      delayMaxMs: figure(hb?.eventLoopDelayMs),
      delayP99Ms: figure(hb?.eventLoopDelayP99Ms),
      ...(since?.loop ?? NO_LOOP),
      executing: figure(hb?.executing),
      queued: figure(hb?.queued),
      processing: w.processing,
      keys: w.keys,
      lastSeenMsAgo: w.lastSeenMsAgo,
      rates: since?.rates ?? ZERO_RATES,
    };
  }

  /**
   * Bytes per second, and the loop's shares of the time, between the worker's last two
   * heartbeats, from its cumulative counters over the time between their arrivals (`at`:
   * when `hb` came; the frame that first sees a heartbeat may be up to an interval late,
   * which would skew a rate by as much); a restart reads as 0. Frames may come more often
   * than heartbeats: a frame that finds the same heartbeat repeats its figures.
   */
  #since(name: string, hb: WorkerHeartbeat, at: number): Previous {
    const before = this.#previous.get(name);
    if (before?.hb === hb) return before;
    const current: Previous = {
      hb,
      rates: ZERO_RATES,
      loop: NO_LOOP,
      at,
      spillWrite: figure(hb.spilledBytes),
      spillRead: figure(hb.unspilledBytes),
      sent: figure(hb.servedFromDiskBytes) + figure(hb.servedFromMemoryBytes) + figure(hb.shuffleSentBytes),
      received: figure(hb.receivedIntoDiskBytes) + figure(hb.receivedIntoMemoryBytes) + figure(hb.shuffleReceivedBytes),
    };
    this.#previous.set(name, current);
    if (before === undefined || at <= before.at) return current;
    const seconds = (at - before.at) / 1000;
    const rate = (k: keyof Rates): number => Math.max(0, current[k] - before[k]) / seconds;
    current.rates = { spillWrite: rate('spillWrite'), spillRead: rate('spillRead'), sent: rate('sent'), received: rate('received') };
    // Capped at 1: a worker reads its times a beat before it sends them, so the spacing of
    // the arrivals only approximates that of the readings.
    const share = (now: unknown, then: unknown): number | null =>
      typeof now === 'number' && typeof then === 'number' && Number.isFinite(now - then) ? Math.min(1, Math.max(0, now - then) / seconds) : null;
    current.loop = { loopRunShare: share(hb.loopRunSeconds, before.hb.loopRunSeconds), loopWaitShare: share(hb.loopWaitSeconds, before.hb.loopWaitSeconds) };
    return current;
  }

  /** One history point a second per worker, for `historyMs`. */
  #record(now: number, workers: WorkerFrame[]): void {
    if (now - this.#lastHistoryAt < 1000) return;
    this.#lastHistoryAt = now;
    const keep = Math.ceil(this.options.historyMs / 1000) + 1;
    for (const w of workers) {
      if (w.state === 'lost' || w.state === 'closed') continue;
      let points = this.#history.get(w.name);
      if (points === undefined) this.#history.set(w.name, (points = []));
      points.push([now, w.rss, w.managed + w.pinned + w.detached, w.spilled]);
      if (points.length > keep) points.splice(0, points.length - keep);
    }
  }
}
