import {
  type ComputeTaskParams,
  type DataAddress,
  type Graph,
  type KeyErredParams,
  type KeyReadyParams,
  type ProgressParams,
  Methods,
  type RegisterWorkerResult,
  type SubmitResult,
  type TaskSpec,
  type WorkerHeartbeat,
  ref,
} from '../../src/cluster/protocol.js';
import { Channel } from '../../src/control/index.js';
import { Scheduler, type SchedulerOptions } from '../../src/scheduler/index.js';
import { waitFor } from '../helpers/wait.js';

export const TOKEN = 'scheduler-test-token';

/** What the helpers need of a test context: somewhere to register cleanups. */
export interface Cleanup {
  after(fn: () => unknown): void;
}

export async function startScheduler(t: Cleanup, options: SchedulerOptions = {}): Promise<Scheduler> {
  const scheduler = await Scheduler.start({ token: TOKEN, ...options });
  t.after(() => scheduler.close());
  return scheduler;
}

/** A task of the fake module: fake workers never import it, they only report it finished. */
export function task(...deps: string[]): TaskSpec {
  return { fn: { module: 'file:///fake/module.js', name: 'f' }, args: deps.map((d) => ref(d)) };
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Every fake worker by data port, so fakes can "fetch" from each other. */
const byPort = new Map<number, FakeWorker>();
let nextPort = 40000;

export interface FakeWorkerOptions {
  name?: string;
  nthreads?: number;
  /** Answer compute-task by itself (after `delayMs`). Default true. */
  auto?: boolean;
  delayMs?: () => number;
  /** Reported size of a result. Default 100. */
  size?: (key: string) => number;
  heartbeats?: boolean;
  /** The memory limit it registers with. Default 1 GiB. */
  memoryLimit?: number;
}

/**
 * A worker that computes nothing: it registers, records every message, and (in auto mode)
 * answers compute-task with task-finished. Before "running" it checks that each input is
 * held by a named holder that is alive; a live holder without the key is recorded in
 * `violations` (the scheduler released data a pending task needed).
 */
export class FakeWorker {
  readonly channel: Channel;
  readonly id: string;
  readonly data: DataAddress;
  readonly computes: ComputeTaskParams[] = [];
  readonly releases: string[][] = [];
  readonly cancels: string[] = [];
  readonly store = new Set<string>();
  readonly inFlight = new Map<string, ComputeTaskParams>();
  readonly violations: string[] = [];
  finished = 0;
  /** Every key this worker reported finished, in order. */
  readonly finishedKeys: string[] = [];
  #dead = false;
  #heartbeat: NodeJS.Timeout | undefined;
  readonly #options: FakeWorkerOptions;

  private constructor(channel: Channel, id: string, data: DataAddress, options: FakeWorkerOptions) {
    this.channel = channel;
    this.id = id;
    this.data = data;
    this.#options = options;
  }

  static async connect(t: Cleanup, scheduler: Scheduler, options: FakeWorkerOptions = {}): Promise<FakeWorker> {
    const channel = await Channel.connect(scheduler.address, { token: TOKEN });
    const data = { host: '127.0.0.1', port: nextPort++ };
    const holder: { worker?: FakeWorker } = {};
    // Handlers first: compute-task may follow the registration answer at once.
    channel.handle(Methods.releaseKeys, (p) => holder.worker?.onRelease((p as { keys: string[] }).keys));
    channel.handle(Methods.cancelTask, (p) => holder.worker?.onCancel((p as { key: string }).key));
    const pending: ComputeTaskParams[] = [];
    channel.handle(Methods.computeTask, (p) => (holder.worker === undefined ? pending.push(p as ComputeTaskParams) : holder.worker.onCompute(p as ComputeTaskParams)));
    const registered = await channel.request<RegisterWorkerResult>(Methods.registerWorker, {
      name: options.name ?? `fake-${data.port}`,
      data,
      memoryLimit: options.memoryLimit ?? 1 << 30,
      nthreads: options.nthreads ?? 1,
      pid: process.pid,
    });
    const worker = new FakeWorker(channel, registered.workerId, data, options);
    holder.worker = worker;
    byPort.set(data.port, worker);
    if (options.heartbeats !== false) {
      worker.#heartbeat = setInterval(() => channel.notify(Methods.heartbeat, worker.heartbeatPayload()), registered.heartbeatIntervalMs);
    }
    t.after(() => worker.close());
    for (const p of pending) worker.onCompute(p);
    return worker;
  }

  /** Closed by the test (at once, before the scheduler hears of it) or by the scheduler. */
  get closed(): boolean {
    return this.#dead || this.channel.closed;
  }

  heartbeatPayload(): WorkerHeartbeat {
    const bytes = this.store.size * 100;
    return {
      workerId: this.id,
      residentBytes: bytes,
      memory: { count: this.store.size, bytes },
      pinned: { count: 0, bytes: 0 },
      disk: { count: 0, bytes: 7 },
      detached: { count: 0, bytes: 0 },
      unmanaged: 5,
      rss: bytes + 1000,
      paused: false,
      eventLoopDelayMs: 1,
      executing: this.inFlight.size,
      queued: 0,
      spilledBytes: 0,
      unspilledBytes: 0,
      servedFromDiskBytes: 0,
      servedFromMemoryBytes: 0,
    };
  }

  stopHeartbeats(): void {
    clearInterval(this.#heartbeat);
  }

  close(): void {
    this.#dead = true;
    this.stopHeartbeats();
    this.channel.close();
  }

  /** Reports `key` computed here. */
  finish(key: string, size = this.#options.size?.(key) ?? 100): void {
    this.inFlight.delete(key);
    this.store.add(key);
    this.finished++;
    this.finishedKeys.push(key);
    this.channel.notify(Methods.taskFinished, { workerId: this.id, key, size, where: 'memory', computeSeconds: 0, fetchSeconds: 0 });
  }

  /** Says the task began running here (from then on, this worker dying counts against it). */
  start(key: string): void {
    this.channel.notify(Methods.taskStarted, { workerId: this.id, key });
  }

  fail(key: string, message: string): void {
    this.inFlight.delete(key);
    this.channel.notify(Methods.taskErred, { workerId: this.id, key, error: { name: 'RangeError', message, stack: `RangeError: ${message}\n    at f` } });
  }

  missing(task: string, key: string, holders: DataAddress[]): void {
    this.inFlight.delete(task);
    this.channel.notify(Methods.missingData, { workerId: this.id, task, key, holders });
  }

  onCompute(params: ComputeTaskParams): void {
    this.computes.push(params);
    this.inFlight.set(params.key, params);
    if (this.#options.auto === false) return;
    for (const [dep, holders] of Object.entries(params.deps)) {
      const live = holders.map((h) => byPort.get(h.port)).filter((w): w is FakeWorker => w !== undefined && !w.closed);
      if (live.some((w) => w.store.has(dep))) continue;
      if (live.length > 0) {
        // A live holder lost it: a violation, unless the task was cancelled (the cancel-task may still be on its way).
        const cancelled = this.cancels.length;
        setTimeout(() => {
          if (!this.cancels.slice(cancelled).includes(params.key)) this.violations.push(`${params.key} needed ${dep}, released on its live holder`);
        }, 30);
      }
      this.missing(params.key, dep, holders);
      return;
    }
    setTimeout(() => {
      if (this.inFlight.get(params.key) === params && !this.closed) this.finish(params.key);
    }, this.#options.delayMs?.() ?? 0);
  }

  onRelease(keys: string[]): void {
    this.releases.push(keys);
    for (const key of keys) this.store.delete(key);
  }

  onCancel(key: string): void {
    this.cancels.push(key);
    this.inFlight.delete(key);
  }

  released(): string[] {
    return this.releases.flat();
  }
}

export class FakeClient {
  readonly channel: Channel;
  readonly id: string;
  readonly ready = new Map<string, KeyReadyParams>();
  readonly readyCount = new Map<string, number>();
  readonly erred = new Map<string, KeyErredParams>();

  private constructor(channel: Channel, id: string) {
    this.channel = channel;
    this.id = id;
  }

  static async connect(t: Cleanup, scheduler: Scheduler): Promise<FakeClient> {
    const channel = await Channel.connect(scheduler.address, { token: TOKEN });
    const holder: { client?: FakeClient } = {};
    channel.handle(Methods.keyReady, (p) => {
      const params = p as KeyReadyParams;
      holder.client?.ready.set(params.key, params);
      holder.client?.readyCount.set(params.key, (holder.client.readyCount.get(params.key) ?? 0) + 1);
    });
    channel.handle(Methods.keyErred, (p) => holder.client?.erred.set((p as KeyErredParams).key, p as KeyErredParams));
    const { clientId } = await channel.request<{ clientId: string }>(Methods.registerClient, { name: 'test-client' });
    const client = new FakeClient(channel, clientId);
    holder.client = client;
    t.after(() => client.channel.close());
    return client;
  }

  submit(graph: Graph, wanted: string[]): Promise<SubmitResult> {
    return this.channel.request<SubmitResult>(Methods.submit, { graph, wanted });
  }

  release(keys: string[]): Promise<unknown> {
    return this.channel.request(Methods.release, { keys });
  }

  whoHas(keys: string[]): Promise<Record<string, DataAddress[]>> {
    return this.channel.request(Methods.whoHas, { keys });
  }

  progress(): Promise<ProgressParams> {
    return this.channel.request<ProgressParams>(Methods.progress, {});
  }

  async waitReady(keys: string[], timeoutMs = 10_000): Promise<void> {
    await waitFor(() => keys.every((k) => this.ready.has(k)), `key-ready for ${keys.join(', ')}`, timeoutMs);
  }

  async waitErred(keys: string[], timeoutMs = 10_000): Promise<void> {
    await waitFor(() => keys.every((k) => this.erred.has(k)), `key-erred for ${keys.join(', ')}`, timeoutMs);
  }

  close(): void {
    this.channel.close();
  }
}
