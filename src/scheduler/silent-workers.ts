import type { ControlChannels } from './channels.js';
import type { WorkerDepartures } from './departures.js';
import type { Engine } from './engine.js';
import { NotRegisteredError } from './errors.js';
import type { Logger } from './log.js';
import type { NoWorkersWatch } from './no-workers.js';

/** The scheduler's parts the heartbeat check works with. */
export interface SilentWorkersParts {
  readonly engine: Engine;
  readonly channels: ControlChannels;
  readonly departures: WorkerDepartures;
  readonly noWorkers: NoWorkersWatch;
  readonly log: Logger;
}

/**
 * Removes workers silent for longer than `workerTimeoutMs`, checking at an interval; each
 * check also runs the no-workers watch.
 */
export class SilentWorkers {
  readonly #parts: SilentWorkersParts;
  readonly #timeoutMs: number;
  readonly #intervalMs: number;
  readonly #timer: NodeJS.Timeout;
  /** When the check last ran, and when this process last came back from a stall of its own. */
  #lastCheck = Date.now();
  #resumedAt = 0;

  constructor(parts: SilentWorkersParts, timeoutMs: number, intervalMs: number) {
    this.#parts = parts;
    this.#timeoutMs = timeoutMs;
    this.#intervalMs = intervalMs;
    this.#timer = setInterval(() => this.#check(), intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  #check(): void {
    const { engine, channels, departures, log } = this.#parts;
    const now = Date.now();
    const gap = now - this.#lastCheck;
    this.#lastCheck = now;
    // Timers run before the sockets are read: after a stall of this process (a blocked loop,
    // SIGSTOP, a VM pause) the workers' heartbeats are still unread, so silence counts from
    // when the scheduler ran again, not from the last message it got round to reading.
    if (gap > 2 * this.#intervalMs + 100) {
      this.#resumedAt = now;
      log.warn({ stalledMs: gap }, 'the scheduler itself stalled; workers get a full timeout from now');
    }
    for (const worker of [...engine.workers.values()]) {
      const silentMs = now - Math.max(worker.lastSeen, this.#resumedAt);
      if (silentMs <= this.#timeoutMs) continue;
      log.warn({ worker: worker.id, silentMs }, 'worker missed its heartbeats; removing it');
      departures.remove(worker);
      // Destroyed, not ended: a hung worker might never close its side (and never free the channel).
      channels.get(worker.id)?.close(new NotRegisteredError(`worker ${worker.id} missed its heartbeats`));
      channels.delete(worker.id);
    }
    this.#parts.noWorkers.check(now);
  }
}
