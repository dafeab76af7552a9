import {
  Methods,
  type RegisterWorkerResult,
  type RetireWorkersResult,
  type TaskErrorInfo,
  type TaskFinishedParams,
  type WorkerHeartbeat,
} from '../cluster/protocol.js';
import { checkAllowedModules } from '../cluster/security.js';
import type { Channel } from '../control/index.js';
import { functionLabel } from '../metrics/task-duration.js';
import type { ShuffleExtension } from '../shuffle/scheduler-extension.js';
import { ShuffleMethods, isShuffleFunction, shuffleUserFunctions } from '../shuffle/protocol.js';
import type { ControlChannels } from './channels.js';
import type { WorkerDepartures } from './departures.js';
import type { Engine } from './engine.js';
import { AlreadyRegisteredError, NotRegisteredError, WrongRoleError } from './errors.js';
import { validateSubmission } from './graph.js';
import type { SchedulerLifecycle } from './lifecycle.js';
import type { Logger } from './log.js';
import type { SchedulerMetrics } from './metrics.js';
import type { ModuleRegistry } from './modules.js';
import type { TaskStream } from './task-stream.js';
import { type WorkerRecord, checkReachable, checkRegisterWorker, newWorker, object, string, stringArray } from './workers.js';

type Session = { role: 'none' } | { role: 'worker'; worker: WorkerRecord } | { role: 'client'; id: string };

const WORKER_METHODS = new Set<string>([
  Methods.heartbeat,
  Methods.taskStarted,
  Methods.taskFinished,
  Methods.taskErred,
  Methods.missingData,
  Methods.workerClosing,
  ShuffleMethods.get,
  ShuffleMethods.transferred,
  ShuffleMethods.handedOver,
  Methods.addKeys,
]);
const CLIENT_METHODS = new Set<string>([Methods.submit, Methods.release, Methods.progress, Methods.uploadModule, Methods.retireWorkers]);

/** The scheduler's parts its control connections act on. */
export interface ControlSessionsParts {
  readonly engine: Engine;
  readonly channels: ControlChannels;
  readonly departures: WorkerDepartures;
  readonly modules: ModuleRegistry;
  readonly shuffles: ShuffleExtension;
  readonly metrics: SchedulerMetrics;
  /** The last finished tasks, for the dashboard. */
  readonly tasks: TaskStream;
  readonly life: SchedulerLifecycle;
  readonly log: Logger;
  /** Answers a client's retire-workers once the workers have left. */
  readonly scheduler: { retireWorkers(names: readonly string[]): Promise<RetireWorkersResult> };
  readonly allowModules: readonly string[] | undefined;
  readonly heartbeatIntervalMs: number;
  readonly registerTimeoutMs: number;
}

/**
 * The scheduler's side of each control connection: it registers as a worker or a client
 * (or is closed), then each message is checked against its role and handed to the engine.
 */
export class ControlSessions {
  readonly #parts: ControlSessionsParts;
  #nextId = 1;

  constructor(parts: ControlSessionsParts) {
    this.#parts = parts;
  }

  accept(channel: Channel): void {
    const session: { current: Session } = { current: { role: 'none' } };
    // An authenticated peer that never says who it is would hold its connection forever.
    const deadline = setTimeout(() => {
      if (session.current.role !== 'none') return;
      this.#parts.log.warn({ remote: channel.remoteAddress, ms: this.#parts.registerTimeoutMs }, 'control connection did not register; closing it');
      channel.close(new NotRegisteredError(`no register-worker or register-client within ${this.#parts.registerTimeoutMs} ms`));
    }, this.#parts.registerTimeoutMs);
    deadline.unref();
    channel.once('close', () => clearTimeout(deadline));
    const on = (method: string, fn: (params: unknown) => unknown): void => {
      channel.handle(method, (params) => this.#guard(channel, session.current, method, () => fn(params)));
    };
    on(Methods.registerWorker, (params) => {
      const registration = checkRegisterWorker(params);
      checkReachable(registration.data, channel.remoteHost);
      const worker = newWorker(`w-${this.#nextId++}`, registration);
      session.current = { role: 'worker', worker };
      this.#parts.channels.set(worker.id, channel);
      // Before any task: the engine may place tasks naming them as soon as it has the worker.
      for (const shipped of this.#parts.modules.all()) channel.notify(Methods.shipModule, shipped);
      const held = this.#parts.engine.addWorker(worker, registration.keys ?? []);
      this.#parts.log.info({ worker: worker.id, workerName: worker.name, data: worker.data, nthreads: worker.nthreads, ...held }, 'worker registered');
      const result: RegisterWorkerResult = { workerId: worker.id, heartbeatIntervalMs: this.#parts.heartbeatIntervalMs };
      return result;
    });
    on(Methods.registerClient, (params) => {
      const id = `c-${this.#nextId++}`;
      this.#parts.engine.addClient(id, string(object(params, 'register-client params').name, 'register-client: name'));
      session.current = { role: 'client', id };
      this.#parts.channels.set(id, channel);
      this.#parts.log.info({ client: id }, 'client registered');
      return { clientId: id };
    });
    const worker = (): WorkerRecord => (session.current as { worker: WorkerRecord }).worker;
    const clientId = (): string => (session.current as { id: string }).id;
    on(Methods.heartbeat, (params) => {
      const beat = object(params, 'heartbeat') as unknown as WorkerHeartbeat;
      const before = worker().heartbeat?.spillFailure;
      this.#parts.engine.heartbeat(worker(), beat);
      if (typeof beat.spillFailure === 'string' && beat.spillFailure !== before) this.#parts.log.warn({ worker: worker().id, error: beat.spillFailure }, 'worker cannot spill');
    });
    on(Methods.taskStarted, (params) => this.#parts.engine.taskStarted(worker(), string(object(params, 'task-started params').key, 'task-started: key')));
    on(Methods.taskFinished, (params) => {
      const p = object(params, 'task-finished params');
      const size = typeof p.size === 'number' && p.size >= 0 ? p.size : 0;
      const where = typeof p.where === 'string' ? p.where : 'memory';
      const key = string(p.key, 'task-finished: key');
      const seconds = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0);
      const finished = { workerId: worker().id, key, size, where, computeSeconds: seconds(p.computeSeconds), fetchSeconds: seconds(p.fetchSeconds) };
      this.#recordTask(worker(), finished);
      this.#parts.engine.taskFinished(worker(), finished);
    });
    on(Methods.taskErred, (params) => {
      const p = object(params, 'task-erred params');
      this.#parts.engine.taskErred(worker(), string(p.key, 'task-erred: key'), errorInfo(p.error));
    });
    on(Methods.missingData, (params) => {
      const p = object(params, 'missing-data params');
      const holders = Array.isArray(p.holders) ? p.holders.map((h) => object(h, 'missing-data holder')) : [];
      this.#parts.engine.missingData(worker(), {
        workerId: worker().id,
        task: string(p.task, 'missing-data: task'),
        key: string(p.key, 'missing-data: key'),
        holders: holders.map((h) => ({ host: string(h.host, 'missing-data: holder host'), port: Number(h.port) })),
        corrupt: p.corrupt === true,
      });
      if (p.corrupt === true) this.#parts.log.warn({ worker: worker().id, key: p.key, task: p.task }, 'a worker\'s copy of an input was corrupt; dropped, recomputing it if no other holder has it');
    });
    on(Methods.workerClosing, (params) => {
      const reschedule = typeof params === 'object' && params !== null && Array.isArray((params as { reschedule?: unknown }).reschedule) ? (params as { reschedule: unknown[] }).reschedule : [];
      const first = !worker().closing;
      this.#parts.engine.markClosing(worker(), reschedule.filter((k): k is string => typeof k === 'string'));
      if (first) this.#parts.log.info({ worker: worker().id, workerName: worker().name, keys: worker().has.size, rescheduled: reschedule.length }, 'worker retiring');
    });
    on(Methods.addKeys, (params) => {
      const p = object(params, 'add-keys params');
      this.#parts.engine.addKeys(worker(), stringArray(p.keys ?? [], 'add-keys: keys'), stringArray(p.missing ?? [], 'add-keys: missing'));
    });
    on(Methods.retireWorkers, (params) => this.#parts.scheduler.retireWorkers(stringArray(object(params, 'retire-workers params').workers, 'retire-workers: workers')));
    on(ShuffleMethods.get, (params) => this.#parts.shuffles.get(params));
    on(ShuffleMethods.transferred, (params) => this.#parts.shuffles.transferred(params));
    on(ShuffleMethods.handedOver, (params) => this.#parts.shuffles.handedOver(worker(), params));
    on(Methods.whoHas, (params) => this.#parts.engine.whoHas(stringArray(object(params, 'who-has params').keys, 'who-has: keys')));
    on(Methods.submit, async (params) => {
      const id = clientId();
      const valid = await validateSubmission(params, (key) => this.#parts.engine.tasks.has(key));
      this.#parts.modules.checkGraph(valid.order);
      checkAllowedModules(
        valid.order,
        this.#parts.allowModules,
        (module) => this.#parts.modules.origin(module),
        // A shuffle task runs Spillway's shuffle and the user's split or combine: those are judged.
        (spec) => (isShuffleFunction(spec.fn) ? shuffleUserFunctions(spec) : [spec.fn]),
      );
      if (!this.#parts.engine.clients.has(id)) return { added: 0 }; // it left while its graph was checked
      const result = this.#parts.engine.submit(id, valid);
      this.#parts.log.debug({ client: id, added: result.added, wanted: valid.wanted.length }, 'graph submitted');
      return result;
    });
    on(Methods.release, (params) => {
      this.#parts.engine.release(clientId(), stringArray(object(params, 'release params').keys, 'release: keys'));
      return null;
    });
    on(Methods.progress, () => this.#parts.engine.progress(clientId()));
    on(Methods.uploadModule, (params) => {
      const result = this.#parts.modules.upload(params);
      this.#parts.log.info({ client: clientId(), url: (params as { url: string }).url, module: result.module, workers: result.workers }, 'module uploaded');
      return result;
    });
    channel.on('unhandled', (method: string) => {
      this.#parts.log.warn({ method, remote: channel.remoteAddress }, 'unknown notification');
      if (session.current.role === 'none') channel.close();
    });
    channel.on('handler-error', (method: string, err: unknown) => this.#parts.log.warn({ method, err }, 'notification refused'));
    channel.once('close', () => this.#onClose(session.current));
  }

  /** Checks the caller's role before running a handler; a first message that is not a registration closes the channel. */
  #guard(channel: Channel, session: Session, method: string, run: () => unknown): unknown {
    if (this.#parts.life.closed) throw new NotRegisteredError('the scheduler is closing');
    const registering = method === Methods.registerWorker || method === Methods.registerClient;
    if (session.role === 'none' && !registering) {
      setImmediate(() => channel.close());
      throw new NotRegisteredError(`${method} before register-worker or register-client; closing the channel`);
    }
    if (session.role !== 'none' && registering) throw new AlreadyRegisteredError(`this channel is already registered as a ${session.role}`);
    if (session.role !== 'worker' && WORKER_METHODS.has(method)) throw new WrongRoleError(`${method} is for workers`);
    if (session.role !== 'client' && CLIENT_METHODS.has(method)) throw new WrongRoleError(`${method} is for clients`);
    if (session.role === 'worker') {
      // Removed (missed heartbeats) while its channel drains: what it still says is stale.
      if (this.#parts.engine.workers.get(session.worker.id) !== session.worker) throw new NotRegisteredError(`worker ${session.worker.id} was removed`);
      session.worker.lastSeen = Date.now();
    }
    return run();
  }

  #onClose(session: Session): void {
    if (session.role === 'worker') {
      this.#parts.channels.delete(session.worker.id);
      if (this.#parts.life.closed) return;
      const w = session.worker;
      if (w.closing) this.#parts.log.info({ worker: w.id, workerName: w.name }, 'worker retired');
      else this.#parts.log.warn({ worker: w.id, workerName: w.name }, 'worker connection closed');
      this.#parts.departures.remove(w);
    } else if (session.role === 'client') {
      this.#parts.channels.delete(session.id);
      if (this.#parts.life.closed) return;
      this.#parts.log.info({ client: session.id }, 'client left');
      this.#parts.engine.removeClient(session.id);
    }
  }

  /** Into the task stream and the duration histogram: only the answer to a task this worker was given. */
  #recordTask(worker: WorkerRecord, finished: TaskFinishedParams): void {
    if (!worker.processing.has(finished.key)) return;
    const spec = this.#parts.engine.tasks.get(finished.key)?.spec;
    if (spec === undefined) return;
    // A shipped module is labelled by the file it came from: its versions share one series.
    const fn = this.#parts.modules.named(spec.fn);
    this.#parts.metrics.observeTask(fn, finished.computeSeconds);
    this.#parts.tasks.add({
      key: finished.key,
      fn: functionLabel(fn),
      worker: worker.name,
      endedAt: Date.now(),
      computeSeconds: finished.computeSeconds,
      fetchSeconds: finished.fetchSeconds,
    });
  }
}

function errorInfo(value: unknown): TaskErrorInfo {
  const e = typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
  const info: TaskErrorInfo = {
    name: typeof e.name === 'string' ? e.name : 'Error',
    message: typeof e.message === 'string' ? e.message : String(value),
  };
  if (typeof e.stack === 'string') info.stack = e.stack;
  if (typeof e.code === 'string') info.code = e.code;
  return info;
}
