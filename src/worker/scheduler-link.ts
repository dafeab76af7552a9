import { Methods, type RegisterWorkerParams, type RegisterWorkerResult } from '../cluster/protocol.js';
import type { Channel, ChannelOptions } from '../control/channel.js';
import { ShuffleWorkerMethods } from '../shuffle/protocol.js';
import { connectWithRetry } from '../control/connect.js';
import { AddressError } from '../control/errors.js';
import { ProtocolError, RemoteError } from '../transfer/errors.js';
import { clientTls } from '../transfer/tls.js';
import type { ResolvedWorkerOptions } from './options.js';

/** What the scheduler tells a worker; handled from before registration (see register). */
const SCHEDULER_NOTIFICATIONS = [
  Methods.computeTask,
  Methods.cancelTask,
  Methods.releaseKeys,
  Methods.workerRemoved,
  Methods.shipModule,
  Methods.forgetModule,
  Methods.acquireReplicas,
  Methods.retire,
  Methods.retired,
  ShuffleWorkerMethods.expect,
  ShuffleWorkerMethods.handover,
  ShuffleWorkerMethods.forget,
];

/** A registered connection to the scheduler; `replay` delivers what arrived with the registration answer. */
export interface Registered {
  channel: Channel;
  registration: RegisterWorkerResult;
  replay: () => void;
}

/**
 * The worker's current registration with the scheduler: its control channel and the id it
 * was given. Every part of the worker talks to the scheduler through this one object, so a
 * reconnection replaces the channel for all of them at once.
 */
export class SchedulerLink {
  #channel: Channel;
  #workerId: string;

  constructor(registered: Registered) {
    this.#channel = registered.channel;
    this.#workerId = registered.registration.workerId;
  }

  get channel(): Channel {
    return this.#channel;
  }

  get workerId(): string {
    return this.#workerId;
  }

  /** The channel is closed: the scheduler is lost until the worker registers again. */
  get closed(): boolean {
    return this.#channel.closed;
  }

  notify(method: string, params: unknown): void {
    this.#channel.notify(method, params);
  }

  request<T>(method: string, params: unknown, timeoutMs: number): Promise<T> {
    return this.#channel.request<T>(method, params, timeoutMs);
  }

  /** Takes the channel and id of a new registration. */
  replace(registered: Registered): void {
    this.#channel = registered.channel;
    this.#workerId = registered.registration.workerId;
  }
}

/**
 * Connects to the scheduler (retrying until the connect timeout) and registers. Handlers
 * first: a compute-task (and a cancel-task of it) may follow the registration answer at
 * once. The channel picks a message's handler when it reads it and calls it a microtask
 * later: one read with the registration answer still lands here, and is replayed in order
 * (`replay`) once the worker can take it.
 */
export async function register(
  opts: ResolvedWorkerOptions,
  params: RegisterWorkerParams,
  dispatch: (method: string, params: unknown) => void,
  signal?: AbortSignal,
): Promise<Registered> {
  const channelOptions: ChannelOptions = { token: opts.token, tls: opts.tls === undefined ? undefined : clientTls(opts.tls) };
  const channel = await connectWithRetry(opts.scheduler, channelOptions, { timeoutMs: opts.schedulerConnectTimeoutMs, signal });
  const early: { method: string; params: unknown }[] = [];
  let live = false;
  for (const method of SCHEDULER_NOTIFICATIONS) {
    channel.handle(method, (message) => {
      if (!live) early.push({ method, params: message });
      else dispatch(method, message);
    });
  }
  try {
    const registration = await channel.request<RegisterWorkerResult>(Methods.registerWorker, params, 30_000);
    checkRegistration(registration, opts.heartbeatIntervalMs);
    const replay = (): void => {
      live = true;
      for (const { method, params: message } of early.splice(0)) dispatch(method, message);
    };
    return { channel, registration, replay };
  } catch (err) {
    channel.close();
    // The scheduler refused the data address: a configuration error, named as one here.
    if (err instanceof RemoteError && err.remoteCode === 'SPW_ERR_ADDRESS') throw new AddressError(err.message);
    throw err;
  }
}

/** A registration answer the worker can run on: a workerId, and heartbeats at a sane interval (its own, if set). */
function checkRegistration(registration: RegisterWorkerResult, ownIntervalMs: number | undefined): void {
  const interval = ownIntervalMs ?? registration?.heartbeatIntervalMs;
  if (typeof registration?.workerId !== 'string' || typeof interval !== 'number' || !Number.isFinite(interval) || interval < 1) {
    throw new ProtocolError(`the scheduler's registration answer is malformed: ${JSON.stringify(registration)?.slice(0, 200)}`);
  }
}
