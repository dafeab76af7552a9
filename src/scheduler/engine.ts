import { GraphError, describeKey } from '../errors.js';
import { formatBytes } from '../units.js';
import type {
  ComputeTaskParams,
  DataAddress,
  KeyErredParams,
  KeyReadyParams,
  MissingDataParams,
  ProgressParams,
  SubmitResult,
  TaskErrorInfo,
  TaskFinishedParams,
  WhoHasResult,
  WorkerHeartbeat,
} from '../cluster/protocol.js';
import { LOST_INPUT_CODE } from './errors.js';
import type { ValidSubmission } from './graph.js';
import { Placement } from './placement.js';
import { Retirements } from './retirement.js';
import { type Failure, type TaskRecord, TaskTable } from './state.js';
import { type WorkerRecord, capacity, sameAddress } from './workers.js';

/** Where the engine's decisions go (the Scheduler sends them on channels; tests may record them). */
export interface Outbox {
  computeTask(worker: WorkerRecord, params: ComputeTaskParams): void;
  releaseKeys(worker: WorkerRecord, keys: string[]): void;
  cancelTask(worker: WorkerRecord, key: string): void;
  keyReady(clientId: string, params: KeyReadyParams): void;
  keyErred(clientId: string, params: KeyErredParams): void;
  acquireReplicas(worker: WorkerRecord, keys: Record<string, DataAddress[]>): void;
  /** Start retiring (a client asked). */
  retire(worker: WorkerRecord): void;
  /** Retirement done: exit. */
  retired(worker: WorkerRecord): void;
}

/**
 * Decisions an extension (the shuffle's scheduler side, src/shuffle) takes part in. Every
 * hook is optional and called within the engine's event, so its records stay consistent.
 */
export interface EngineExtension {
  /** The only worker a ready task may run on, or undefined for anywhere. */
  restrictedTo?(record: TaskRecord): string | undefined;
  /** False: this finished task's result is stale; the worker releases it and the task runs again. */
  acceptResult?(record: TaskRecord, worker: WorkerRecord): boolean;
  /** True: this error means "run it again once its inputs are back", not a failure. */
  retryError?(record: TaskRecord, error: TaskErrorInfo): boolean;
  /** A worker was removed; called after the engine's own bookkeeping, before tasks are placed. */
  workerRemoved?(worker: WorkerRecord): void;
}

export interface ClientRecord {
  readonly id: string;
  readonly name: string;
  readonly wanted: Set<string>;
  /** Keys of the graphs it submitted (dropped once the scheduler forgets them): its progress. */
  readonly tasks: Set<string>;
  readonly since: number;
}

export interface Counters {
  tasksFinished: number;
  tasksErred: number;
  /** Tasks computed again after their result had reached memory once (its holders were lost). */
  tasksRecomputed: number;
  /** Reruns of tasks that threw, allowed by their spec's `retries`. */
  tasksRetried: number;
  /** Tasks failed with SPW_ERR_KILLED_WORKER: more of their workers died than `allowedFailures`. */
  tasksKilledWorkers: number;
  /** Tasks failed with SPW_ERR_NO_WORKERS: ready while no worker could run them for `noWorkersTimeoutMs`. */
  tasksNoWorkers: number;
  /** Copies a worker found corrupt (checksum, unreadable) and dropped; the key is recomputed if no other holder has it. */
  corruptCopies: number;
  workersLost: number;
  /** Workers that left after `worker-closing` (retired), counted apart from the ones lost. */
  workersRetired: number;
  /** Keys a retiring worker alone held, copied to another worker before it left. */
  keysHandedOver: number;
}

export interface EngineOptions {
  /** Worker deaths a running task survives; the next one fails it with SPW_ERR_KILLED_WORKER. Default 3. */
  allowedFailures?: number;
}

export const KILLED_WORKER_CODE = 'SPW_ERR_KILLED_WORKER';
export const MEMORY_HINT_CODE = 'SPW_ERR_MEMORY_HINT';
export const NO_WORKERS_CODE = 'SPW_ERR_NO_WORKERS';

/**
 * The scheduler's decisions, free of I/O: every method is one event (a message, a lost
 * worker) and leaves the records consistent, with the resulting messages handed to the
 * Outbox. Task-state rules are in docs/cluster.md#scheduler.
 */
export class Engine {
  readonly tasks = new TaskTable();
  readonly workers = new Map<string, WorkerRecord>();
  readonly clients = new Map<string, ClientRecord>();
  readonly counters: Counters = {
    tasksFinished: 0,
    tasksErred: 0,
    tasksRecomputed: 0,
    tasksRetried: 0,
    tasksKilledWorkers: 0,
    tasksNoWorkers: 0,
    corruptCopies: 0,
    workersLost: 0,
    workersRetired: 0,
    keysHandedOver: 0,
  };
  readonly placement = new Placement(this.tasks, this.workers);
  readonly #out: Outbox;
  readonly #allowedFailures: number;
  readonly #retirements: Retirements;
  /** release-keys to send at the end of the current event, per worker. */
  readonly #releases = new Map<WorkerRecord, string[]>();
  #nextPriority = 0;
  #extension: EngineExtension | undefined;

  constructor(outbox: Outbox, options: EngineOptions = {}) {
    this.#out = outbox;
    this.#allowedFailures = options.allowedFailures ?? 3;
    this.#retirements = new Retirements(this.tasks, this.workers, outbox);
  }

  get extension(): EngineExtension | undefined {
    return this.#extension;
  }

  set extension(extension: EngineExtension | undefined) {
    this.#extension = extension;
    this.placement.restrictedTo = (record) => extension?.restrictedTo?.(record);
  }

  /** Drops the data of keys in memory as if their last holder were lost: still needed, they are computed again. */
  invalidate(keys: readonly string[]): void {
    for (const key of keys) {
      const record = this.tasks.get(key);
      if (record?.state !== 'memory') continue;
      this.#dropData(record);
      this.#lose(record);
    }
    this.#done();
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
        this.#addHolder(record, worker);
        kept++;
      } else {
        this.#release(worker, key);
      }
    }
    this.#done();
    return { reported: keys.length, kept };
  }

  heartbeat(worker: WorkerRecord, heartbeat: WorkerHeartbeat): void {
    worker.heartbeat = heartbeat;
  }

  /**
   * The worker is going away (it retires): no new tasks; what waits for it goes elsewhere,
   * as do the compute-tasks it will not run (`reschedule`); what only it holds is copied to
   * open workers, and it is told `retired` once that is done and its running tasks finished.
   */
  markClosing(worker: WorkerRecord, reschedule: readonly string[] = []): void {
    if (!worker.closing) {
      worker.closing = true;
      for (const record of this.placement.takeQueue(worker.id)) this.placement.enqueue(record);
    }
    for (const key of reschedule) {
      const record = this.tasks.get(key);
      if (record?.state !== 'processing' || record.worker !== worker.id) continue;
      this.#unassign(record, false);
      this.#reassess(record);
    }
    this.#failUnplaceable();
    this.#done();
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
      this.#addHolder(record, worker);
      this.counters.keysHandedOver++;
      return true;
    });
    for (const key of unwanted) this.#release(worker, key);
    this.#done();
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
    this.#releases.delete(worker);
    const requeue = this.placement.takeQueue(worker.id);
    const lost: TaskRecord[] = [];
    for (const key of worker.has) {
      const record = this.tasks.get(key);
      if (record === undefined || !record.holders.delete(worker.id)) continue;
      if (record.holders.size === 0 && record.state === 'memory') lost.push(record);
    }
    for (const record of lost) this.#lose(record);
    for (const key of worker.processing) {
      const record = this.tasks.get(key);
      if (record === undefined || record.state !== 'processing' || record.worker !== worker.id) continue;
      record.worker = undefined;
      if (record.startedOn === worker.id && !worker.closing && ++record.deaths > this.#allowedFailures) {
        this.counters.tasksKilledWorkers++;
        this.#fail(record, { failedKey: key, error: killedWorkerError(key, worker.name, record.deaths) });
      } else {
        this.#reassess(record);
      }
    }
    for (const record of requeue) if (record.state === 'ready' && record.queue === undefined) this.placement.enqueue(record);
    this.#failUnplaceable();
    this.#extension?.workerRemoved?.(worker);
    this.#done();
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
      this.#fail(record, {
        failedKey: record.key,
        error: {
          name: 'NoWorkersError',
          message: `task ${describeKey(record.key)} could not run: no worker for ${Math.round(waitedMs / 1000)} s (noWorkersTimeoutMs)`,
          code: NO_WORKERS_CODE,
        },
      });
    }
    this.#done();
    return ready.length;
  }

  taskFinished(worker: WorkerRecord, params: TaskFinishedParams): void {
    // Only the answer to a compute-task still outstanding on this worker is news: any other
    // result may have crossed a release-keys for the same key (the worker no longer has it).
    const assigned = worker.processing.delete(params.key);
    const record = this.tasks.get(params.key);
    if (assigned && record?.state === 'processing' && record.worker === worker.id && this.#extension?.acceptResult?.(record, worker) === false) {
      this.#unassign(record, false);
      this.#release(worker, params.key);
      this.#reassess(record);
      this.#done();
      return;
    }
    if (record?.state === 'memory' && record.holders.has(worker.id)) {
      // Already recorded here.
    } else if (record === undefined || record.state === 'erred' || !assigned || (record.state !== 'memory' && !this.tasks.needed(record))) {
      // Cancelled or forgotten meanwhile: nobody needs this copy.
      if (record?.worker === worker.id) record.worker = undefined;
      this.#release(worker, params.key);
    } else if (record.state === 'memory') {
      this.#addHolder(record, worker);
    } else {
      if (record.state === 'processing') this.#unassign(record, record.worker !== worker.id);
      record.size = params.size;
      record.where = params.where;
      record.computed = true;
      this.#addHolder(record, worker);
      this.tasks.setState(record, 'memory');
      this.counters.tasksFinished++;
      const holders = this.#addresses(record);
      for (const client of record.wantedBy) this.#out.keyReady(client, { key: record.key, holders, size: record.size });
      for (const key of record.dependents) {
        const dependent = this.tasks.get(key);
        if (dependent?.state === 'waiting' && dependent.waitingOn.delete(record.key) && dependent.waitingOn.size === 0) {
          this.#makeReady(dependent);
        }
      }
      this.#settle([record.key, ...record.deps]);
    }
    this.#done();
  }

  /** The worker began running a task it was sent. */
  taskStarted(worker: WorkerRecord, key: string): void {
    const record = this.tasks.get(key);
    if (record?.state === 'processing' && record.worker === worker.id) record.startedOn = worker.id;
  }

  taskErred(worker: WorkerRecord, key: string, error: TaskErrorInfo): void {
    const record = this.tasks.get(key);
    if (record?.state === 'processing' && record.worker === worker.id && this.#extension?.retryError?.(record, error) === true) {
      this.#unassign(record, false);
      this.#reassess(record);
    } else if (record?.state === 'processing' && record.worker === worker.id) {
      this.#unassign(record, false);
      if (record.retriesLeft > 0) {
        record.retriesLeft--;
        this.counters.tasksRetried++;
        this.#reassess(record);
      } else {
        this.counters.tasksErred++;
        this.#fail(record, { failedKey: key, error });
      }
    } else {
      worker.processing.delete(key);
    }
    this.#done();
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
      this.#release(holder, record.key);
    }
    if (record?.state === 'memory' && record.holders.size === 0) this.#lose(record);
    const task = this.tasks.get(params.task);
    if (task?.state === 'processing' && task.worker === worker.id) {
      this.#unassign(task, false);
      if (record === undefined) {
        this.#fail(task, {
          failedKey: params.key,
          error: {
            name: 'LostInputError',
            message: `input ${describeKey(params.key)} of ${describeKey(params.task)} was lost and the scheduler has no task to recompute it`,
            code: LOST_INPUT_CODE,
          },
        });
      } else {
        this.#reassess(task);
      }
    }
    this.#done();
  }

  whoHas(keys: readonly string[]): WhoHasResult {
    const out: WhoHasResult = {};
    for (const key of keys) {
      const record = this.tasks.get(key);
      out[key] = record?.state === 'memory' ? this.#addresses(record) : [];
    }
    return out;
  }

  // ---- clients -----------------------------------------------------------------------

  addClient(id: string, name: string): void {
    this.clients.set(id, { id, name, wanted: new Set(), tasks: new Set(), since: Date.now() });
  }

  /** A client left: everything it wanted is released; work nobody needs any more is cancelled. */
  removeClient(id: string): void {
    const client = this.clients.get(id);
    if (client === undefined) return;
    this.release(id, [...client.wanted]);
    this.clients.delete(id);
  }

  release(id: string, keys: readonly string[]): void {
    const client = this.clients.get(id);
    if (client === undefined) return;
    for (const key of keys) {
      client.wanted.delete(key);
      this.tasks.get(key)?.wantedBy.delete(id);
    }
    this.#settle(keys);
    this.#done();
  }

  /** Adds a validated graph. Keys already known keep their records (and results). */
  submit(id: string, submission: ValidSubmission): SubmitResult {
    const client = this.clients.get(id);
    if (client === undefined) throw new GraphError('submit from an unknown client');
    // Validation yields to the event loop: a known key may have been forgotten meanwhile.
    const adding = new Set(submission.order.filter((t) => !this.tasks.has(t.key)).map((t) => t.key));
    for (const task of submission.order) {
      for (const dep of task.deps) {
        if (!adding.has(dep) && !this.tasks.has(dep)) {
          throw new GraphError(`key ${describeKey(dep)} was released while the graph was being checked; submit it again with its task`);
        }
      }
    }
    const missing = submission.wanted.find((key) => !adding.has(key) && !this.tasks.has(key));
    if (missing !== undefined) throw new GraphError(`key ${describeKey(missing)} was released while the graph was being checked; submit it again with its task`);
    const base = this.#nextPriority;
    this.#nextPriority += submission.order.length;
    submission.order.forEach((task, i) => {
      if (adding.has(task.key)) this.tasks.add(task.key, task.spec, task.deps, base + i);
    });
    for (const task of submission.order) client.tasks.add(task.key);
    // Validation yields: a known key may have been forgotten meanwhile (and would never leave the set).
    for (const key of submission.known) if (this.tasks.has(key)) client.tasks.add(key);
    for (const key of submission.wanted) {
      const record = this.tasks.get(key) as TaskRecord;
      client.tasks.add(key);
      record.wantedBy.add(id);
      client.wanted.add(key);
      if (record.state === 'memory') this.#out.keyReady(id, { key, holders: this.#addresses(record), size: record.size });
      else if (record.state === 'erred' && record.failure !== undefined) this.#out.keyErred(id, { key, ...record.failure });
    }
    this.#settle([...adding, ...submission.wanted]);
    this.#done();
    return { added: adding.size };
  }

  /**
   * The tasks of a client's graphs that the scheduler still knows: computed at least once
   * (a result released after its dependents used it counts), erred, and in all. One pass
   * over them, 4096 a loop turn: clients ask at an
   * interval, not per event, and a count that moves while it is taken is still a progress.
   */
  async progress(id: string): Promise<ProgressParams> {
    const client = this.clients.get(id);
    const out: ProgressParams = { done: 0, erred: 0, total: 0 };
    if (client === undefined) return out;
    let seen = 0;
    for (const key of client.tasks) {
      if (++seen % 4096 === 0) await new Promise((resolve) => setImmediate(resolve));
      const record = this.tasks.get(key);
      if (record === undefined) continue; // forgotten while this count yielded
      out.total++;
      if (record.state === 'erred') out.erred++;
      else if (record.computed || record.state === 'memory') out.done++;
    }
    return out;
  }

  // ---- transitions -------------------------------------------------------------------

  /**
   * Re-examines keys whose need may have changed (iteratively, through their inputs):
   * forgets what nobody refers to, releases data and cancels work nobody needs, and
   * starts computing released keys that are needed again.
   */
  #settle(start: Iterable<string>): void {
    const work = [...start];
    for (let key = work.pop(); key !== undefined; key = work.pop()) {
      const record = this.tasks.get(key);
      if (record === undefined) continue;
      if (this.tasks.forgettable(record)) {
        this.tasks.forget(record);
        // Out of every client's progress too: pruned only by progress requests, the sets of
        // a client that never asks grew by every key it submitted, for as long as it stayed.
        for (const client of this.clients.values()) client.tasks.delete(key);
        work.push(...record.deps);
      } else if (this.tasks.needed(record)) {
        if (record.state === 'released') this.#activate(record, work);
      } else if (record.state === 'memory') {
        this.#dropData(record);
        this.tasks.setState(record, 'released');
        work.push(record.key);
      } else if (record.state === 'waiting' || record.state === 'ready' || record.state === 'processing') {
        if (record.state === 'processing') this.#unassign(record, true);
        this.tasks.setState(record, 'released');
        work.push(...record.deps, record.key);
      }
    }
  }

  /** A released key is needed: compute it (after its inputs, which may need computing too). */
  #activate(record: TaskRecord, work: string[]): void {
    const failed = record.deps.map((dep) => this.tasks.get(dep)).find((dep) => dep?.state === 'erred');
    if (failed?.failure !== undefined) {
      this.#fail(record, failed.failure);
      return;
    }
    // Refused before its inputs are computed for nothing.
    if (this.#tooLarge(record)) return this.#fail(record, { failedKey: record.key, error: this.#memoryHintError(record) });
    if (record.computed) this.counters.tasksRecomputed++;
    this.tasks.setState(record, 'waiting');
    for (const dep of record.deps) {
      if (this.tasks.get(dep)?.state === 'memory') continue;
      record.waitingOn.add(dep);
      work.push(dep);
    }
    if (record.waitingOn.size === 0) this.#makeReady(record);
  }

  /** A task that was running (or about to) must be placed again: ready, or waiting for lost inputs. */
  #reassess(record: TaskRecord): void {
    const inputs = record.deps.map((dep) => this.tasks.get(dep) as TaskRecord);
    const failed = inputs.find((dep) => dep.state === 'erred');
    if (failed?.failure !== undefined) return this.#fail(record, failed.failure);
    const missing = inputs.filter((dep) => dep.state !== 'memory');
    if (missing.length === 0) return this.#makeReady(record);
    this.tasks.setState(record, 'waiting');
    for (const dep of missing) record.waitingOn.add(dep.key);
    this.#settle(missing.map((dep) => dep.key));
  }

  #makeReady(record: TaskRecord): void {
    if (this.#tooLarge(record)) return this.#fail(record, { failedKey: record.key, error: this.#memoryHintError(record) });
    this.tasks.setState(record, 'ready');
    this.placement.enqueue(record);
  }

  /** Its memory hint is more than any open worker's memory limit (with no open worker, the no-workers timeout decides). */
  #tooLarge(record: TaskRecord): boolean {
    if (record.memory === 0) return false;
    let open = false;
    for (const worker of this.workers.values()) {
      if (worker.closing) continue;
      if (worker.memoryLimit >= record.memory) return false;
      open = true;
    }
    return open;
  }

  /** Ready tasks with memory hints that no worker left could take fail now rather than wait forever. */
  #failUnplaceable(): void {
    for (const record of [...this.placement.hinted()]) {
      if (record.state === 'ready' && this.#tooLarge(record)) this.#fail(record, { failedKey: record.key, error: this.#memoryHintError(record) });
    }
  }

  #memoryHintError(record: TaskRecord): TaskErrorInfo {
    let largest = 0;
    for (const worker of this.workers.values()) if (!worker.closing) largest = Math.max(largest, worker.memoryLimit);
    return {
      name: 'MemoryHintError',
      message: `task ${describeKey(record.key)} asks for ${formatBytes(record.memory)} of memory (its memory hint), more than any connected worker has (the largest memory limit is ${formatBytes(largest)})`,
      code: MEMORY_HINT_CODE,
    };
  }

  /** A key's last copy is gone. Tasks waiting for it wait again; it is recomputed if needed. */
  #lose(record: TaskRecord): void {
    this.tasks.setState(record, 'released');
    for (const key of record.dependents) {
      const dependent = this.tasks.get(key);
      if (dependent?.state === 'ready') this.tasks.setState(dependent, 'waiting');
      if (dependent?.state === 'waiting') dependent.waitingOn.add(record.key);
    }
    this.#settle([record.key]);
  }

  /** A task failed: it and every task waiting on it are erred; clients wanting them are told. */
  #fail(first: TaskRecord, failure: Failure): void {
    const stack = [first];
    const inputs: string[] = [];
    for (let record = stack.pop(); record !== undefined; record = stack.pop()) {
      if (record.state === 'erred' || record.state === 'memory') continue;
      if (record.state === 'processing') this.#unassign(record, record !== first);
      record.failure = failure;
      this.tasks.setState(record, 'erred');
      inputs.push(...record.deps);
      for (const client of record.wantedBy) this.#out.keyErred(client, { key: record.key, ...failure });
      for (const key of record.dependents) {
        const dependent = this.tasks.get(key);
        if (dependent?.state === 'waiting') stack.push(dependent);
      }
    }
    this.#settle([first.key, ...inputs]);
  }

  #unassign(record: TaskRecord, cancel: boolean): void {
    const worker = record.worker === undefined ? undefined : this.workers.get(record.worker);
    if (worker !== undefined) {
      worker.processing.delete(record.key);
      if (cancel) this.#out.cancelTask(worker, record.key);
    }
    record.worker = undefined;
  }

  #addHolder(record: TaskRecord, worker: WorkerRecord): void {
    if (record.holders.has(worker.id)) return;
    record.holders.add(worker.id);
    worker.has.add(record.key);
    worker.nbytes += record.size;
  }

  #dropData(record: TaskRecord): void {
    for (const id of record.holders) {
      const worker = this.workers.get(id);
      if (worker === undefined) continue;
      worker.has.delete(record.key);
      worker.nbytes -= record.size;
      this.#release(worker, record.key);
    }
    record.holders.clear();
  }

  #release(worker: WorkerRecord, key: string): void {
    const keys = this.#releases.get(worker);
    if (keys === undefined) this.#releases.set(worker, [key]);
    else keys.push(key);
  }

  #addresses(record: TaskRecord): DataAddress[] {
    const out: DataAddress[] = [];
    for (const id of record.holders) {
      const worker = this.workers.get(id);
      if (worker !== undefined) out.push(worker.data);
    }
    return out;
  }

  /**
   * End of an event: fill free slots, then send the batched releases. Every worker takes
   * from its own queue and the shared one before any steals: a worker only steals from one
   * that cannot start the task itself, and a thief looking before its victim had refilled
   * saw a free slot there and stayed idle (a worker that registered first took nothing
   * from the holder of a shuffle's inputs for a whole run).
   */
  #done(): void {
    for (const steal of [false, true]) {
      for (const worker of this.workers.values()) {
        if (worker.closing) continue;
        while (worker.processing.size < capacity(worker)) {
          const record = this.placement.next(worker, steal);
          if (record === undefined) break;
          this.#send(worker, record);
        }
      }
    }
    this.#retirements.step();
    for (const [worker, keys] of this.#releases) if (this.workers.get(worker.id) === worker) this.#out.releaseKeys(worker, keys);
    this.#releases.clear();
  }

  #send(worker: WorkerRecord, record: TaskRecord): void {
    const deps: Record<string, DataAddress[]> = {};
    for (const dep of record.deps) deps[dep] = this.#addresses(this.tasks.get(dep) as TaskRecord);
    this.tasks.setState(record, 'processing');
    record.worker = worker.id;
    record.startedOn = undefined;
    worker.processing.add(record.key);
    const params: ComputeTaskParams = { key: record.key, spec: record.spec, deps, priority: record.priority };
    if (this.#followed(record)) params.followed = true;
    this.#out.computeTask(worker, params);
  }

  /** Some dependent waits for this task alone: it becomes ready when this one finishes. */
  #followed(record: TaskRecord): boolean {
    for (const key of record.dependents) {
      const dependent = this.tasks.get(key);
      if (dependent?.state === 'waiting' && dependent.waitingOn.size === 1 && dependent.waitingOn.has(record.key)) return true;
    }
    return false;
  }
}

function killedWorkerError(key: string, worker: string, deaths: number): TaskErrorInfo {
  return {
    name: 'KilledWorkerError',
    message: `task ${describeKey(key)} was running on ${deaths} workers that died, the last one ${JSON.stringify(worker)}; it is not retried again (allowedFailures)`,
    code: KILLED_WORKER_CODE,
    worker,
  };
}
