import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  type ComputeTaskParams,
  type DataAddress,
  type MissingDataParams,
  type RegisterWorkerParams,
  type TaskErredParams,
  type TaskFinishedParams,
  type TaskSpec,
  type WhoHasParams,
  type WhoHasResult,
  type WorkerHeartbeat,
  Methods,
} from '../../src/cluster/protocol.js';
import type { Channel } from '../../src/control/channel.js';
import { ControlServer } from '../../src/control/server.js';
import { waitFor } from '../helpers/wait.js';
import { ext } from '../helpers/suite.js';

export const TASKS = pathToFileURL(path.join(import.meta.dirname, 'fixtures', `tasks${ext}`)).href;

export function fn(name: string, ...args: unknown[]): TaskSpec {
  return { fn: { module: TASKS, name }, args };
}

interface Registered {
  params: RegisterWorkerParams;
  channel: Channel;
  workerId: string;
}

/**
 * A scheduler that does nothing on its own: it registers workers, records what they
 * send, answers who-has from a table the test fills, and sends what the test asks.
 */
export class FakeScheduler {
  readonly workers: Registered[] = [];
  readonly finished: TaskFinishedParams[] = [];
  readonly erred: TaskErredParams[] = [];
  readonly missing: MissingDataParams[] = [];
  readonly heartbeats: { at: number; beat: WorkerHeartbeat }[] = [];
  readonly whoHasAsked: string[][] = [];
  whoHas: WhoHasResult = {};

  private constructor(
    readonly server: ControlServer,
    readonly heartbeatIntervalMs: number,
  ) {
    server.on('channel', (channel: Channel) => this.#accept(channel));
  }

  static async start(options: { heartbeatIntervalMs?: number; token?: string } = {}): Promise<FakeScheduler> {
    const server = await ControlServer.listen({ token: options.token });
    return new FakeScheduler(server, options.heartbeatIntervalMs ?? 100);
  }

  get address(): DataAddress {
    return this.server.address;
  }

  #accept(channel: Channel): void {
    channel.handle(Methods.registerWorker, (params) => {
      const workerId = `w${this.workers.length}`;
      this.workers.push({ params: params as RegisterWorkerParams, channel, workerId });
      return { workerId, heartbeatIntervalMs: this.heartbeatIntervalMs };
    });
    const record =
      <T>(list: T[]) =>
      (params: unknown): void => {
        list.push(params as T);
      };
    channel.handle(Methods.taskFinished, record(this.finished));
    channel.handle(Methods.taskErred, record(this.erred));
    channel.handle(Methods.missingData, record(this.missing));
    channel.handle(Methods.heartbeat, (params) => {
      this.heartbeats.push({ at: performance.now(), beat: params as WorkerHeartbeat });
    });
    channel.handle(Methods.whoHas, (params) => {
      const { keys } = params as WhoHasParams;
      this.whoHasAsked.push(keys);
      return Object.fromEntries(keys.map((k) => [k, this.whoHas[k] ?? []]));
    });
  }

  channelOf(workerId: string): Channel {
    const found = this.workers.find((w) => w.workerId === workerId);
    if (found === undefined) throw new Error(`no worker ${workerId}`);
    return found.channel;
  }

  compute(workerId: string, key: string, spec: TaskSpec, options: { deps?: Record<string, DataAddress[]>; priority?: number; consumes?: string[]; followed?: boolean } = {}): void {
    const params: ComputeTaskParams = { key, spec, deps: options.deps ?? {}, priority: options.priority ?? 0 };
    if (options.consumes !== undefined) params.consumes = options.consumes;
    if (options.followed !== undefined) params.followed = options.followed;
    this.channelOf(workerId).notify(Methods.computeTask, params);
  }

  finishedKey(key: string): Promise<TaskFinishedParams> {
    return waitFor(() => this.finished.some((f) => f.key === key), `task-finished ${key}`).then(
      () => this.finished.find((f) => f.key === key) as TaskFinishedParams,
    );
  }

  close(): Promise<void> {
    return this.server.close();
  }
}

/** An address nobody listens on (a port that was just free). */
export async function deadAddress(): Promise<DataAddress> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return { host: '127.0.0.1', port };
}
