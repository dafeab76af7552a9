import { statfs } from 'node:fs/promises';
import { Methods, type WorkerHeartbeat } from '../cluster/protocol.js';
import { type LoopCpuTimes, loopCpuTimes } from '../runtime/loop-cpu.js';
import type { ShuffleService } from '../shuffle/worker-service.js';
import type { SpillStore } from '../store/spill-store.js';
import type { DataServer } from '../transfer/server.js';
import type { Fetcher } from './fetcher.js';
import { LoopDelayMonitor } from './loop-delay.js';
import type { SchedulerLink } from './scheduler-link.js';
import type { StoreErrorCounts } from './store-errors.js';
import type { WorkerTasks } from './tasks.js';

/** The worker's parts a heartbeat reports on. */
export interface HeartbeatParts {
  /** Carries the beats, with the worker id of the current registration. */
  readonly link: SchedulerLink;
  readonly store: SpillStore;
  readonly server: DataServer;
  /** The spill folder, whose file system's free space is reported. */
  readonly directory: string;
  /** Executing and queued tasks. */
  readonly tasks: WorkerTasks;
  /** Cumulative bytes fetched from peers, by where they went here. */
  readonly fetcher: Pick<Fetcher, 'received'>;
  /** Cumulative bytes of shuffle pieces pushed to peers and received from them; the shuffles held. */
  readonly shuffle: Pick<ShuffleService, 'bytes' | 'receiver'>;
  /** Cumulative store errors by code. */
  readonly storeErrors: StoreErrorCounts;
  /** The supervisor's restart counts of this worker's slot, when supervised. */
  readonly supervisorRestarts?: Readonly<Record<string, number>>;
}

/**
 * Sends 'heartbeat' every interval. Each beat closes a window of the event-loop delay
 * monitor, so every heartbeat reports the worst stall since the previous one.
 */
export class Heartbeat {
  readonly #delays = new LoopDelayMonitor();
  readonly #timer: NodeJS.Timeout;
  /** Delay of the last closed interval (ms): what figures() reports between beats. */
  #delay = { max: 0, p99: 0 };
  #diskFree: number | null = null;
  #measuringDisk = false;
  /** The loop thread's times when the heartbeat started, and at the latest reading. */
  #loopAtStart: LoopCpuTimes | null | undefined;
  #loop: LoopCpuTimes | null = null;
  #measuringLoop = false;

  constructor(
    private readonly parts: HeartbeatParts,
    intervalMs: number,
  ) {
    this.#timer = setInterval(() => this.beat(), intervalMs);
    this.#timer.unref();
    this.#measureLoop();
  }

  /** Closes the current delay window and builds a heartbeat from it. */
  build(): WorkerHeartbeat {
    this.#delay = this.#delays.closeWindow();
    this.#measureDisk();
    this.#measureLoop();
    return this.figures();
  }

  /** The worker's figures now, with the event-loop delay of the last closed window (no window is closed). */
  figures(): WorkerHeartbeat {
    const { store, server, tasks } = this.parts;
    const stats = store.stats();
    const served = server.stats();
    const received = this.parts.fetcher.received;
    const shuffle = this.parts.shuffle.bytes;
    return {
      workerId: this.parts.link.workerId,
      residentBytes: stats.memory.bytes + stats.spilling.bytes + stats.pinned.bytes,
      memory: { count: stats.memory.count + stats.spilling.count, bytes: stats.memory.bytes + stats.spilling.bytes },
      pinned: stats.pinned,
      disk: stats.disk,
      detached: stats.detached,
      unmanaged: stats.unmanaged,
      rss: stats.process.rss,
      paused: stats.paused,
      spillFailure: store.writeFailure?.message ?? null,
      eventLoopDelayMs: this.#delay.max,
      eventLoopDelayP99Ms: this.#delay.p99,
      eventLoopDelayRunP99Ms: this.#delays.runP99,
      loopRunSeconds: this.#loop?.runSeconds ?? null,
      loopWaitSeconds: this.#loop?.waitSeconds ?? null,
      executing: tasks.running.size,
      queued: tasks.queue.size,
      spilledBytes: stats.counters.spilledBytes,
      unspilledBytes: stats.counters.unspilledBytes,
      servedFromDiskBytes: served.servedFromDiskBytes,
      servedFromMemoryBytes: served.servedFromMemoryBytes,
      receivedIntoMemoryBytes: received.memory,
      receivedIntoDiskBytes: received.disk,
      shuffleSentBytes: shuffle.sent,
      shuffleReceivedBytes: shuffle.received,
      shufflesHeld: this.parts.shuffle.receiver.heldShuffles,
      spillWriteSeconds: stats.counters.writeSeconds,
      spillReadSeconds: stats.counters.readSeconds,
      tiers: stats.tiers.map((t) => ({ name: t.name, count: t.count, bytes: t.bytes })),
      spillErrors: this.parts.storeErrors.byCode(),
      diskFreeBytes: this.#diskFree,
      ...(Number.isFinite(store.pauseBytes) ? { pauseBytes: store.pauseBytes } : {}),
      ...(this.parts.supervisorRestarts === undefined ? {} : { supervisorRestarts: { ...this.parts.supervisorRestarts } }),
    };
  }

  beat(): void {
    this.parts.link.notify(Methods.heartbeat, this.build());
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#delays.stop();
  }

  /** Like the disk: each beat starts a reading of the loop's times and the next beat reports it, counted from the first. */
  #measureLoop(): void {
    if (this.#measuringLoop || this.#loopAtStart === null) return;
    this.#measuringLoop = true;
    void loopCpuTimes().then((now) => {
      this.#measuringLoop = false;
      if (this.#loopAtStart === undefined) {
        this.#loopAtStart = now;
        return;
      }
      const start = this.#loopAtStart;
      if (now === null || start === null) return;
      this.#loop = { runSeconds: now.runSeconds - start.runSeconds, waitSeconds: now.waitSeconds - start.waitSeconds };
    });
  }

  /** statfs is asynchronous: each beat starts one and the next beat reports it. */
  #measureDisk(): void {
    if (this.#measuringDisk) return;
    this.#measuringDisk = true;
    statfs(this.parts.directory).then(
      (fs) => {
        this.#diskFree = fs.bavail * fs.bsize;
        this.#measuringDisk = false;
      },
      () => {
        this.#diskFree = null;
        this.#measuringDisk = false;
      },
    );
  }
}
