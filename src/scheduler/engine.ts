import type {
  MissingDataParams,
  ProgressParams,
  SubmitResult,
  TaskErrorInfo,
  TaskFinishedParams,
  WhoHasResult,
  WorkerHeartbeat,
} from '../cluster/protocol.js';
import { type ClientRecord, ClientEvents } from './client-events.js';
import { type Counters, newCounters } from './counters.js';
import { killedWorkerError, lostInputError, noWorkersError } from './errors.js';
import type { EngineExtension } from './extension.js';
import type { ValidSubmission } from './graph.js';
import type { Outbox } from './outbox.js';
import { Placement } from './placement.js';
import { Retirements } from './retirement.js';
import { type TaskRecord, TaskTable } from './state.js';
import { Transitions } from './transitions.js';
import { type WorkerRecord, sameAddress } from './workers.js';


export interface EngineOptions {
  /** Worker deaths a running task survives; the next one fails it with SPW_ERR_KILLED_WORKER. Default 3. */
  allowedFailures?: number;
}

/**
 * The scheduler's decisions, free of I/O: every method is one event (a message, a lost
 * worker) and leaves the records consistent, with the resulting messages handed to the
 * Outbox. Task-state rules are in docs/cluster.md#scheduler.
 */
export class Engine {
  readonly tasks = new TaskTable();
  readonly workers = new Map<string, WorkerRecord>();
  readonly clients = new Map<string, ClientRecord>();
  readonly counters: Counters = newCounters();
  readonly placement = new Placement(this.tasks, this.workers);
  readonly #out: Outbox;
  readonly #allowedFailures: number;
  readonly #retirements: Retirements;
  readonly #moves: Transitions;
  readonly #clientEvents: ClientEvents;
  #extension: EngineExtension | undefined;

  constructor(outbox: Outbox, options: EngineOptions = {}) {
    this.#out = outbox;
    this.#allowedFailures = options.allowedFailures ?? 3;
    this.#retirements = new Retirements(this.tasks, this.workers, outbox, (worker) => this.#extension?.holds?.(worker) === true);
    const { tasks, workers, clients, counters, placement } = this;
    this.#moves = new Transitions({ tasks, workers, clients, counters, placement, retirements: this.#retirements, out: outbox });
    this.#clientEvents = new ClientEvents(clients, tasks, this.#moves, outbox);
  }

  get extension(): EngineExtension | undefined {
    return this.#extension;
  }

  set extension(extension: EngineExtension | undefined) {
    this.#extension = extension;
    this.placement.restrictedTo = (record) => extension?.restrictedTo?.(record);
    this.tasks.onForget = (record) => extension?.forgotten?.(record);
  }

  /** Drops the data of keys in memory as if their last holder were lost: still needed, they are computed again. */
  invalidate(keys: readonly string[]): void {
    for (const key of keys) {
      const record = this.tasks.get(key);
      if (record?.state !== 'memory') continue;
      this.#moves.dropData(record);
      this.#moves.lose(record);
    }
    this.#moves.done();
  }

  /** An extension's notification to a worker. */
  notifyWorker(worker: WorkerRecord, method: string, params: unknown): void {
    this.#out.notify?.(worker, method, params);
  }

  /** After an extension changed its mind outside an engine event: place tasks, step retirements. */
  reconsider(): void {
    this.#moves.done();
  }

  // ---- workers -----------------------------------------------------------------------

  /**
   * A worker joins. `keys` are results it already holds (it registers again after losing
   * the scheduler): those still needed in memory elsewhere gain it as a holder, the rest are
   * released on it (a restarted scheduler knows none of them).
   */
  addWorker(worker: WorkerRecord, keys: readonly string[] = []): { reported: number; kept: number } {
    this.workers.set(worker.id, worker);
    this.placement.addWorker(worker.id);
    let kept = 0;
    for (const key of keys) {
      const record = this.tasks.get(key);
      if (record?.state === 'memory') {
        this.#moves.addHolder(record, worker);
        kept++;
      } else {
        this.#moves.release(worker, key);
      }
    }
    this.#moves.done();
    return { reported: keys.length, kept };
  }

  heartbeat(worker: WorkerRecord, heartbeat: WorkerHeartbeat): void {
    worker.heartbeat = heartbeat;
    worker.heartbeatAt = Date.now();
  }

  /**
   * The worker is going away (it retires): no new tasks; what waits for it goes elsewhere,
   * as do the compute-tasks it will not run (`reschedule`); what only it holds is copied to
   * open workers, and it is told `retired` once that is done and its running tasks finished.
   */
  markClosing(worker: WorkerRecord, reschedule: readonly string[] = []): void {
    if (!worker.closing) {
      worker.closing = true;
      this.#extension?.workerClosing?.(worker);
      for (const record of this.placement.takeQueue(worker.id)) this.placement.enqueue(record);
    }
    for (const key of reschedule) {
      const record = this.tasks.get(key);
      if (record?.state !== 'processing' || record.worker !== worker.id) continue;
      this.#moves.unassign(record, false);
      this.#moves.reassess(record);
    }
    this.#moves.failUnplaceable();
    this.#moves.done();
  }

  /** Asks workers to retire (as on SIGTERM); they answer with worker-closing. */
  retire(workers: readonly WorkerRecord[]): void {
    for (const worker of workers) if (!worker.closing) this.#out.retire(worker);
  }

  /** A worker holds the copies `acquire-replicas` asked of it (`missing`: those it could not get). */
  addKeys(worker: WorkerRecord, keys: readonly string[], missing: readonly string[]): void {
    const unwanted = this.#retirements.copied(worker, keys, missing, (key) => {
      const record = this.tasks.get(key);
      if (record?.state !== 'memory') return false;
      this.#moves.addHolder(record, worker);
      this.counters.keysHandedOver++;
      return true;
    });
    for (const key of unwanted) this.#moves.release(worker, key);
    this.#moves.done();
  }

  /**
   * The worker is gone: its tasks run elsewhere, keys only it held are recomputed when still
   * needed. A worker that died without saying `worker-closing` counts against the tasks it
   * had started: past `allowedFailures` such a task fails with SPW_ERR_KILLED_WORKER.
   */
  removeWorker(worker: WorkerRecord): void {
    if (this.workers.get(worker.id) !== worker) return;
    this.workers.delete(worker.id);
    if (worker.closing) this.counters.workersRetired++;
    else this.counters.workersLost++;
    this.#retirements.removed(worker);
    this.#moves.dropReleases(worker);
    const requeue = this.placement.takeQueue(worker.id);
    const lost: TaskRecord[] = [];
    for (const key of worker.has) {
      const record = this.tasks.get(key);
      if (record === undefined || !record.holders.delete(worker.id)) continue;
      if (record.holders.size === 0 && record.state === 'memory') lost.push(record);
    }
    for (const record of lost) this.#moves.lose(record);
    for (const key of worker.processing) {
      const record = this.tasks.get(key);
      if (record === undefined || record.state !== 'processing' || record.worker !== worker.id) continue;
      record.worker = undefined;
      if (record.startedOn === worker.id && !worker.closing && ++record.deaths > this.#allowedFailures) {
        this.counters.tasksKilledWorkers++;
        this.#moves.fail(record, { failedKey: key, error: killedWorkerError(key, worker.name, record.deaths) });
      } else {
        this.#moves.reassess(record);
      }
    }
    for (const record of requeue) if (record.state === 'ready' && record.queue === undefined) this.placement.enqueue(record);
    this.#moves.failUnplaceable();
    this.#extension?.workerRemoved?.(worker);
    this.#moves.done();
  }

  /** Whether a worker is there to take tasks (registered and not closing). */
  hasOpenWorker(): boolean {
    for (const worker of this.workers.values()) if (!worker.closing) return true;
    return false;
  }

  /**
   * No worker has been able to run anything for `waitedMs`: every ready task fails with
   * SPW_ERR_NO_WORKERS, and the tasks waiting on it with it (a client would otherwise wait
   * forever). Returns how many ready tasks failed.
   */
  failForNoWorkers(waitedMs: number): number {
    const ready = [...this.tasks.values()].filter((record) => record.state === 'ready');
    for (const record of ready) {
      if (record.state !== 'ready') continue; // failed already, as a dependent of another
      this.counters.tasksNoWorkers++;
      this.#moves.fail(record, {
        failedKey: record.key,
        error: noWorkersError(record.key, waitedMs),
      });
    }
    this.#moves.done();
    return ready.length;
  }

  taskFinished(worker: WorkerRecord, params: TaskFinishedParams): void {
    // Only the answer to a compute-task still outstanding on this worker is news: any other
    // result may have crossed a release-keys for the same key (the worker no longer has it).
    const assigned = worker.processing.delete(params.key);
    const record = this.tasks.get(params.key);
    if (assigned && record?.state === 'processing' && record.worker === worker.id && this.#extension?.acceptResult?.(record, worker) === false) {
      this.#moves.unassign(record, false);
      this.#moves.release(worker, params.key);
      this.#moves.reassess(record);
      this.#moves.done();
      return;
    }
    if (record?.state === 'memory' && record.holders.has(worker.id)) {
      // Already recorded here.
    } else if (record === undefined || record.state === 'erred' || !assigned || (record.state !== 'memory' && !this.tasks.needed(record))) {
      // Cancelled or forgotten meanwhile: nobody needs this copy.
      if (record?.worker === worker.id) record.worker = undefined;
      this.#moves.release(worker, params.key);
    } else if (record.state === 'memory') {
      this.#moves.addHolder(record, worker);
    } else {
      if (record.state === 'processing') this.#moves.unassign(record, record.worker !== worker.id);
      record.size = params.size;
      record.where = params.where;
      record.computed = true;
      this.#moves.addHolder(record, worker);
      this.tasks.setState(record, 'memory');
      this.counters.tasksFinished++;
      const holders = this.#moves.addresses(record);
      for (const client of record.wantedBy) this.#out.keyReady(client, { key: record.key, holders, size: record.size });
      for (const key of record.dependents) {
        const dependent = this.tasks.get(key);
        if (dependent?.state === 'waiting' && dependent.waitingOn.delete(record.key) && dependent.waitingOn.size === 0) {
          this.#moves.makeReady(dependent);
        }
      }
      this.#moves.settle([record.key, ...record.deps]);
      this.#extension?.finished?.(record);
    }
    this.#moves.done();
  }

  /** The worker began running a task it was sent. */
  taskStarted(worker: WorkerRecord, key: string): void {
    const record = this.tasks.get(key);
    if (record?.state === 'processing' && record.worker === worker.id) record.startedOn = worker.id;
  }

  taskErred(worker: WorkerRecord, key: string, error: TaskErrorInfo): void {
    const record = this.tasks.get(key);
    if (record?.state === 'processing' && record.worker === worker.id && this.#extension?.retryError?.(record, error) === true) {
      this.#moves.unassign(record, false);
      this.#moves.reassess(record);
    } else if (record?.state === 'processing' && record.worker === worker.id) {
      this.#moves.unassign(record, false);
      if (record.retriesLeft > 0) {
        record.retriesLeft--;
        this.counters.tasksRetried++;
        this.#moves.reassess(record);
      } else {
        this.counters.tasksErred++;
        this.#moves.fail(record, { failedKey: key, error });
      }
    } else {
      worker.processing.delete(key);
    }
    this.#moves.done();
  }

  /** The worker could not get `key` from the holders it names: drop them, recompute if nobody is left, resend the task. */
  missingData(worker: WorkerRecord, params: MissingDataParams): void {
    if (params.corrupt === true) this.counters.corruptCopies++;
    const record = this.tasks.get(params.key);
    for (const address of params.holders) {
      const holder = [...this.workers.values()].find((w) => sameAddress(w.data, address));
      if (holder === undefined || record === undefined || !record.holders.delete(holder.id)) continue;
      holder.has.delete(record.key);
      holder.nbytes -= record.size;
      // It may still have a copy we no longer track.
      this.#moves.release(holder, record.key);
    }
    if (record?.state === 'memory' && record.holders.size === 0) this.#moves.lose(record);
    const task = this.tasks.get(params.task);
    if (task?.state === 'processing' && task.worker === worker.id) {
      this.#moves.unassign(task, false);
      if (record === undefined) {
        this.#moves.fail(task, { failedKey: params.key, error: lostInputError(params.key, params.task) });
      } else {
        this.#moves.reassess(task);
      }
    }
    this.#moves.done();
  }

  whoHas(keys: readonly string[]): WhoHasResult {
    const out: WhoHasResult = {};
    for (const key of keys) {
      const record = this.tasks.get(key);
      out[key] = record?.state === 'memory' ? this.#moves.addresses(record) : [];
    }
    return out;
  }

  // ---- clients -----------------------------------------------------------------------

  addClient(id: string, name: string): void {
    this.#clientEvents.add(id, name);
  }

  /** A client left: everything it wanted is released; work nobody needs any more is cancelled. */
  removeClient(id: string): void {
    this.#clientEvents.remove(id);
  }

  release(id: string, keys: readonly string[]): void {
    this.#clientEvents.release(id, keys);
  }

  /** Adds a validated graph. Keys already known keep their records (and results). */
  submit(id: string, submission: ValidSubmission): SubmitResult {
    return this.#clientEvents.submit(id, submission);
  }

  /** The tasks of a client's graphs that the scheduler still knows: done, erred, and in all. */
  progress(id: string): Promise<ProgressParams> {
    return this.#clientEvents.progress(id);
  }

}
