import { Methods } from '../cluster/protocol.js';
import type { Channel } from '../control/index.js';
import type { Outbox } from './outbox.js';
import type { WorkerRecord } from './workers.js';

/** The control channel of each registered worker and client, by id. */
export class ControlChannels {
  readonly #channels = new Map<string, Channel>();

  get(id: string): Channel | undefined {
    return this.#channels.get(id);
  }

  set(id: string, channel: Channel): void {
    this.#channels.set(id, channel);
  }

  delete(id: string): void {
    this.#channels.delete(id);
  }

  /** Sends a notification to each of `workers` that has a channel; returns how many. */
  broadcast(workers: Iterable<WorkerRecord>, method: string, params: unknown): number {
    let sent = 0;
    for (const worker of workers) {
      const channel = this.#channels.get(worker.id);
      if (channel === undefined) continue;
      channel.notify(method, params);
      sent++;
    }
    return sent;
  }
}

/** Sends the engine's decisions on the channels. Client notifications wait a turn so a submit's answer goes out first. */
export function channelOutbox(channels: ControlChannels): Outbox {
  const send = (id: string, method: string, params: unknown): void => channels.get(id)?.notify(method, params);
  return {
    computeTask: (worker, params) => send(worker.id, Methods.computeTask, params),
    releaseKeys: (worker, keys) => send(worker.id, Methods.releaseKeys, { keys }),
    cancelTask: (worker, key) => send(worker.id, Methods.cancelTask, { key }),
    keyReady: (client, params) => setImmediate(() => send(client, Methods.keyReady, params)),
    keyErred: (client, params) => setImmediate(() => send(client, Methods.keyErred, params)),
    acquireReplicas: (worker, keys) => send(worker.id, Methods.acquireReplicas, { keys }),
    retire: (worker) => send(worker.id, Methods.retire, {}),
    retired: (worker) => send(worker.id, Methods.retired, {}),
    notify: (worker, method, params) => send(worker.id, method, params),
  };
}
