import type { EventEmitter } from 'node:events';
import { type AcquireReplicasParams, Methods } from '../cluster/protocol.js';
import type { Logger } from '../log.js';
import type { SpillStore } from '../store/spill-store.js';
import type { Fetcher } from './fetcher.js';
import type { WorkerLifecycle } from './lifecycle.js';
import type { SchedulerLink } from './scheduler-link.js';
import type { TaskReports } from './task-reports.js';
import type { WorkerTasks } from './tasks.js';

/** The worker's parts retirement works with. */
export interface RetirementParts {
  readonly store: SpillStore;
  readonly tasks: WorkerTasks;
  readonly fetcher: Fetcher;
  readonly link: SchedulerLink;
  readonly reports: TaskReports;
  readonly life: WorkerLifecycle;
  readonly log: Logger;
  /** The worker: closed at the end of retirement, and told 'retired'. */
  readonly worker: EventEmitter & { close(): Promise<void> };
}

/**
 * A worker leaving the cluster without losing what only it holds: the scheduler has its
 * keys copied to other workers (acquireReplicas, on those workers) and says `retired`.
 */
export class Retirement {
  readonly #parts: RetirementParts;
  /** Resolves when the scheduler says `retired` (or the worker closes). */
  #retired!: () => void;
  readonly #retiredSignal = new Promise<void>((resolve) => (this.#retired = resolve));

  constructor(parts: RetirementParts) {
    this.#parts = parts;
  }

  /** The scheduler said `retired`, or the retirement cannot finish (the worker closes, the scheduler is lost). */
  retired(): void {
    this.#retired();
  }

  /**
   * Starts no new task, gives the queued ones back to the scheduler, waits for its
   * `retired` (or `timeoutMs`), then closes the worker. Resolves true when the scheduler
   * said it was done.
   */
  retire(timeoutMs: number): Promise<boolean> {
    const { life, link, store, tasks, log } = this.#parts;
    life.retiring ??= (async () => {
      if (life.closed) return false;
      const started = performance.now();
      const reschedule = tasks.takeQueued().map((task) => task.key);
      const stats = store.stats();
      log.info({ memoryKeys: stats.memory.count, spilledKeys: stats.disk.count, rescheduled: reschedule.length, running: tasks.running.size, timeoutMs }, 'retiring');
      this.#parts.reports.giveBack(reschedule);
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
      const graceful = await Promise.race([this.#retiredSignal.then(() => !link.closed), timedOut]);
      clearTimeout(timer);
      const seconds = (performance.now() - started) / 1000;
      if (graceful) log.info({ seconds }, 'retired: every key only this worker held is on another worker');
      else log.warn({ seconds, timeoutMs, running: tasks.running.size }, 'retirement not finished; closing anyway (the scheduler recomputes the rest)');
      await this.#parts.worker.close();
      return graceful;
    })();
    return life.retiring;
  }

  /** The scheduler asked this worker to retire. */
  async retireOnRequest(timeoutMs: number): Promise<void> {
    await this.retire(timeoutMs);
    this.#parts.worker.emit('retired');
  }

  /** Copies of a retiring worker's keys: fetched from the holders named (encoded bytes, never decoded), kept, and reported. */
  async acquireReplicas(params: AcquireReplicasParams): Promise<void> {
    const { life, fetcher, store, link, log } = this.#parts;
    const deps = params?.keys;
    if (life.closed || typeof deps !== 'object' || deps === null || !Object.values(deps).every(Array.isArray)) return;
    const keys = Object.keys(deps);
    let missing: Set<string>;
    try {
      missing = new Set((await fetcher.ensure(keys, deps)).keys());
    } catch {
      missing = new Set(keys);
    }
    if (life.closed) return;
    const got = keys.filter((key) => !missing.has(key) && store.has(key));
    // The scheduler knows of these copies now: they are no longer this worker's to drop.
    for (const key of got) fetcher.replicas.delete(key);
    log.debug({ keys: got.length, missing: keys.length - got.length }, "copies of a retiring worker's keys acquired");
    link.notify(Methods.addKeys, { workerId: link.workerId, keys: got, missing: keys.filter((key) => !got.includes(key)) });
  }
}
