import {
  type AcquireReplicasParams,
  type CancelTaskParams,
  type ComputeTaskParams,
  type ForgetModuleParams,
  Methods,
  type ReleaseKeysParams,
  type ShipModuleParams,
  type WorkerRemovedParams,
} from '../cluster/protocol.js';
import { InvalidArgumentError } from '../errors.js';
import { type ShuffleForgetParams, type ShuffleHandoverParams, type ShuffleSlotParams, ShuffleWorkerMethods } from '../shuffle/protocol.js';
import type { ShuffleService } from '../shuffle/worker-service.js';
import type { SpillStore } from '../store/spill-store.js';
import type { Fetcher } from './fetcher.js';
import type { WorkerLifecycle } from './lifecycle.js';
import type { ModuleCache } from './module-cache.js';
import type { Retirement } from './retirement.js';
import type { TaskPump } from './task-pump.js';
import { type TaskReports, toErrorInfo } from './task-reports.js';
import type { WorkerTasks } from './tasks.js';

/** The worker's parts the scheduler's messages act on. */
export interface SchedulerMessagesParts {
  readonly store: SpillStore;
  readonly tasks: WorkerTasks;
  readonly pump: TaskPump;
  readonly fetcher: Fetcher;
  readonly modules: ModuleCache;
  readonly reports: TaskReports;
  readonly retirement: Retirement;
  readonly life: WorkerLifecycle;
  /** The shuffle service: a retiring worker hands its pieces over, its heir expects them; a shuffle over is forgotten. */
  readonly shuffle: Pick<ShuffleService, 'expect' | 'handover' | 'forget'>;
  /** How long a retirement the scheduler asks for may take. */
  readonly retireTimeoutMs: number;
}

/** The scheduler's notifications to a worker, checked and handed to the part they concern. */
export class SchedulerMessages {
  readonly #parts: SchedulerMessagesParts;

  constructor(parts: SchedulerMessagesParts) {
    this.#parts = parts;
  }

  dispatch(method: string, params: unknown): void {
    const { modules, retirement } = this.#parts;
    if (method === Methods.computeTask) this.#onComputeTask(params as ComputeTaskParams);
    else if (method === Methods.cancelTask) this.#onCancelTask(params as CancelTaskParams);
    else if (method === Methods.workerRemoved) this.#onWorkerRemoved(params as WorkerRemovedParams);
    else if (method === Methods.shipModule) modules.add(params as ShipModuleParams);
    else if (method === Methods.forgetModule) modules.forget(params as ForgetModuleParams);
    else if (method === Methods.acquireReplicas) void retirement.acquireReplicas(params as AcquireReplicasParams);
    else if (method === Methods.retire) void retirement.retireOnRequest(this.#parts.retireTimeoutMs);
    else if (method === Methods.retired) retirement.retired();
    else if (method === ShuffleWorkerMethods.expect) this.#parts.shuffle.expect(params as ShuffleSlotParams);
    else if (method === ShuffleWorkerMethods.handover) void this.#parts.shuffle.handover(params as ShuffleHandoverParams);
    else if (method === ShuffleWorkerMethods.forget) this.#parts.shuffle.forget(params as ShuffleForgetParams);
    else this.#onReleaseKeys(params as ReleaseKeysParams);
  }

  #onComputeTask(params: ComputeTaskParams): void {
    const { life, reports, tasks } = this.#parts;
    if (life.closed) return;
    if (life.isRetiring) {
      // Sent before the scheduler heard this worker is leaving: give it back.
      if (typeof params?.key === 'string') reports.giveBack([params.key]);
      return;
    }
    if (
      typeof params?.key !== 'string' ||
      typeof params.spec?.fn?.module !== 'string' ||
      typeof params.spec.fn.name !== 'string' ||
      (params.spec.args !== undefined && !Array.isArray(params.spec.args)) ||
      (params.deps !== undefined && (typeof params.deps !== 'object' || params.deps === null || !Object.values(params.deps).every(Array.isArray)))
    ) {
      const key = typeof params?.key === 'string' ? params.key : '';
      reports.erred(key, toErrorInfo(new InvalidArgumentError('compute-task needs a key, spec.fn { module, name }, spec.args an array and deps { key: addresses[] }')));
      return;
    }
    if (tasks.running.has(params.key)) return; // already running: its result is on its way
    tasks.queue.add({ ...params, deps: params.deps ?? {}, priority: Number(params.priority) || 0 });
    this.#parts.pump.pump();
  }

  #onReleaseKeys(params: ReleaseKeysParams): void {
    // A running task keeps the version its lease pinned; the store frees it when the lease ends.
    const keys: unknown = params?.keys;
    if (!Array.isArray(keys)) return; // a string would release its characters
    for (const key of keys) {
      if (typeof key !== 'string') continue;
      this.#parts.store.delete(key);
      this.#parts.fetcher.replicas.delete(key);
    }
  }

  #onWorkerRemoved(params: WorkerRemovedParams): void {
    const data = params?.data;
    if (typeof data?.host === 'string' && typeof data.port === 'number') this.#parts.fetcher.holderRemoved(data);
  }

  #onCancelTask(params: CancelTaskParams): void {
    const task = this.#parts.tasks.queue.get(params?.key);
    if (task === undefined) return;
    this.#parts.tasks.dequeue(task);
  }
}
