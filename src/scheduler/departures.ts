import { Methods, type WorkerRemovedParams } from '../cluster/protocol.js';
import type { ControlChannels } from './channels.js';
import type { Engine } from './engine.js';
import type { Logger } from './log.js';
import type { WorkerRecord } from './workers.js';

/** Workers leaving the cluster: the others are told, the engine drops them, and callers waiting for them are woken. */
export class WorkerDepartures {
  readonly #engine: Engine;
  readonly #channels: ControlChannels;
  readonly #log: Logger;
  /** Callers of retireWorkers waiting for a worker to leave. */
  readonly #leaving = new Map<string, Array<() => void>>();

  constructor(engine: Engine, channels: ControlChannels, log: Logger) {
    this.#engine = engine;
    this.#channels = channels;
    this.#log = log;
  }

  /** Removes a worker; the others first hear of it, so their fetches from it (perhaps a frozen peer) end now. */
  remove(worker: WorkerRecord): void {
    const engine = this.#engine;
    if (engine.workers.get(worker.id) !== worker) return;
    const params: WorkerRemovedParams = { workerId: worker.id, data: worker.data };
    for (const other of engine.workers.values()) if (other !== worker) this.#channels.get(other.id)?.notify(Methods.workerRemoved, params);
    const killed = engine.counters.tasksKilledWorkers;
    engine.removeWorker(worker);
    if (engine.counters.tasksKilledWorkers > killed) this.#log.warn({ worker: worker.id, tasks: engine.counters.tasksKilledWorkers - killed }, 'tasks failed with SPW_ERR_KILLED_WORKER');
    for (const resolve of this.#leaving.get(worker.id) ?? []) resolve();
    this.#leaving.delete(worker.id);
  }

  /** Resolves once the worker with this id is no longer registered. */
  gone(id: string): Promise<void> {
    if (!this.#engine.workers.has(id)) return Promise.resolve();
    return new Promise((resolve) => {
      const waiters = this.#leaving.get(id) ?? [];
      waiters.push(resolve);
      this.#leaving.set(id, waiters);
    });
  }
}
