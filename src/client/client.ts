import { randomUUID } from 'node:crypto';
import type { Channel } from '../control/channel.js';
import { connectWithRetry } from '../control/connect.js';
import { checkTlsConfig, clientTls } from '../transfer/tls.js';
import {
  type DataAddress,
  type Graph,
  type KeyErredParams,
  type KeyReadyParams,
  Methods,
  type ProgressParams,
  type RegisterClientParams,
  type WhoHasResult,
} from '../cluster/protocol.js';
import { type ShippedModule, ModuleShipper } from './modules.js';
import { ClosedError, GraphError, InvalidArgumentError } from '../errors.js';
import { SpillStore } from '../store/spill-store.js';
import { DataClient, parseAddress } from '../transfer/client.js';
import { SchedulerLostError } from './errors.js';
import { type ResultSource, fetchResult } from './results.js';
import { taskFailure } from './failures.js';
import { type Future, FutureRegistry } from './futures.js';
import { pollProgress } from './progress.js';
import { Delayed, type FuturesOf, type ResultsOf, type Task, type TaskArg, type TaskArgs, graphOf, resolveGraph } from './tasks.js';
import type { ClientOptions, ComputeOptions, ComputeProgress } from './options.js';
import { checkDefinedFunctions, validateGraph } from './validate.js';
import { KeyHolds } from './key-holds.js';
import { type Waiter, KeyWaiters } from './key-waiters.js';
import { SchedulerCalls } from './scheduler-calls.js';

export type { ClientOptions, ComputeOptions, ComputeProgress } from './options.js';

interface Computation {
  fail(err: Error): void;
}

/**
 * Submits task graphs to a scheduler and gathers their results. Results are pulled from
 * the workers that hold them into a client-side SpillStore (so a large result can spill
 * here too), then handed over and, unless `keep`, released on the cluster.
 */
export class Client {
  readonly #channel: Channel;
  readonly #store: SpillStore;
  readonly #results: ResultSource;
  readonly #address: string;
  readonly #clientId: string;
  readonly #computations = new Set<Computation>();
  readonly #functionChecks = new Map<string, Promise<string | undefined>>();
  readonly #modules: ModuleShipper;
  readonly #scheduler: SchedulerCalls;
  readonly #holds = new KeyHolds();
  readonly #waiters = new KeyWaiters();
  #lost: Error | undefined;
  /** The futures of this client, by key. */
  readonly #futures: FutureRegistry;

  private constructor(channel: Channel, store: SpillStore, data: DataClient, address: string, clientId: string, options: ClientOptions) {
    this.#channel = channel;
    this.#scheduler = new SchedulerCalls(channel);
    this.#store = store;
    this.#results = { store, data, timeoutMs: options.resultTimeoutMs ?? 120_000, whoHas: (keys) => this.whoHas(keys), lost: () => this.#lost };
    this.#address = address;
    this.#clientId = clientId;
    this.#modules = new ModuleShipper((params) => this.#scheduler.uploadModule(params), { auto: options.shipModules ?? true });
    this.#futures = new FutureRegistry({
      fetch: (params, wanted) => this.#fetchResult(params, wanted),
      unclaimed: (keys) => this.#releaseNow(this.#holds.unused(keys)),
      lost: () => this.#lost,
    });
    channel.handle(Methods.keyReady, (p) => this.#dispatch(p as KeyReadyParams, 'ready'));
    channel.handle(Methods.keyErred, (p) => this.#dispatch(p as KeyErredParams, 'erred'));
    channel.on('close', (err?: Error) => this.#onLost(new SchedulerLostError(address, err)));
  }

  /** Connects to a scheduler (`host:port` or `{ host, port }`) and registers as a client. */
  static async connect(address: string | DataAddress, options: ClientOptions = {}): Promise<Client> {
    const peer = parseAddress(address);
    const text = `${peer.host}:${peer.port}`;
    const store = await SpillStore.open({
      memoryLimit: options.memoryLimit ?? '256 MiB',
      directory: options.localDirectory,
      // The process is the user's: its RSS is not the store's to manage.
      monitorIntervalMs: false,
    });
    let channel: Channel | undefined;
    try {
      const tls = options.tls === undefined ? undefined : clientTls(checkTlsConfig(options.tls));
      channel = await connectWithRetry(peer, { token: options.token, tls }, { timeoutMs: options.connectTimeoutMs ?? 120_000 });
      const params: RegisterClientParams = { name: options.name ?? `client-${process.pid}-${randomUUID().slice(0, 8)}` };
      const { clientId } = await channel.request<{ clientId: string }>(Methods.registerClient, params, 30_000);
      return new Client(channel, store, new DataClient({ token: options.token, tls }), text, clientId, options);
    } catch (err) {
      channel?.close();
      await store.close();
      throw err;
    }
  }

  get address(): string {
    return this.#address;
  }
  get clientId(): string {
    return this.#clientId;
  }
  get closed(): boolean {
    return this.#lost !== undefined;
  }

  /**
   * Runs lazy tasks (one, or an array: the results in that order), or a graph dict and
   * returns the values of `wanted`, in that order. Rejects with GraphError before anything
   * runs for a bad graph, TaskError when a task throws (with the worker's stack),
   * KilledWorkerError when a task's workers keep dying, SchedulerLostError when the
   * scheduler goes away, FutureReleasedError for a released future among the arguments.
   */
  compute<T>(node: Delayed<T>, options?: ComputeOptions): Promise<T>;
  compute<const N extends readonly Delayed<unknown>[]>(nodes: N, options?: ComputeOptions): Promise<ResultsOf<N>>;
  compute<T = unknown>(graph: Graph, wanted: readonly string[], options?: ComputeOptions): Promise<T[]>;
  compute(what: Graph | Delayed<unknown> | readonly Delayed<unknown>[], wanted?: readonly string[] | ComputeOptions, options?: ComputeOptions): Promise<unknown> {
    if (what instanceof Delayed || Array.isArray(what)) {
      const nodes: readonly Delayed<unknown>[] = what instanceof Delayed ? [what] : what;
      if (!nodes.every((node) => node instanceof Delayed)) return Promise.reject(new InvalidArgumentError('compute: an array must hold lazy tasks (what calling a task returns)'));
      const { graph, futures } = graphOf(nodes);
      const values = this.#compute(graph, nodes.map((node) => node.key), (wanted ?? {}) as ComputeOptions, futures);
      return what instanceof Delayed ? values.then((v) => v[0]) : values;
    }
    const resolved = resolveGraph(what as Graph);
    return this.#compute(resolved.graph, wanted as readonly string[], options ?? {}, resolved.futures);
  }

  /** Runs `task` on the cluster at once; its result stays there for the future's lifetime. */
  submit<A extends readonly unknown[], R>(task: Task<A, R>, ...args: TaskArgs<A>): Future<R> {
    return this.persist(task(...args));
  }

  /** `task(input, ...rest)` for every input, at once: a future per input, in order. */
  map<P, Rest extends readonly unknown[], R>(task: Task<readonly [P, ...Rest], R>, inputs: Iterable<TaskArg<P>>, ...rest: TaskArgs<Rest>): Future<R>[] {
    const call = task as unknown as (...args: unknown[]) => Delayed<R>;
    return this.persist([...inputs].map((input) => call(input, ...rest)));
  }

  /** The values of futures, in their order (each fetched from a worker that holds it). */
  gather<const F extends readonly Future<unknown>[]>(futures: F): Promise<ResultsOf<F>> {
    try {
      this.#futures.check(futures);
    } catch (err) {
      return Promise.reject(err);
    }
    return Promise.all(futures.map((future) => future.result())) as Promise<ResultsOf<F>>;
  }

  /**
   * Starts computing lazy tasks, or the `wanted` keys of a graph dict, and keeps the results
   * on the cluster: the futures returned (at once; the graph is checked and sent in the
   * background, its errors reject their `result()`) can be given to later graphs and tasks,
   * which then reuse the results instead of computing them again.
   */
  persist<T>(node: Delayed<T>): Future<T>;
  persist<const N extends readonly Delayed<unknown>[]>(nodes: N): FuturesOf<N>;
  persist<T = unknown>(graph: Graph, wanted: readonly string[]): Future<T>[];
  persist(what: Graph | Delayed<unknown> | readonly Delayed<unknown>[], wanted?: readonly string[]): Future<unknown> | Future<unknown>[] {
    if (this.#lost !== undefined) throw this.#lost;
    let graph: Graph;
    let keys: readonly string[];
    let futures: Set<Future<unknown>>;
    if (what instanceof Delayed || Array.isArray(what)) {
      const nodes: readonly Delayed<unknown>[] = what instanceof Delayed ? [what] : what;
      if (!nodes.every((node) => node instanceof Delayed)) throw new InvalidArgumentError('persist: an array must hold lazy tasks (what calling a task returns)');
      ({ graph, futures } = graphOf(nodes));
      keys = nodes.map((node) => node.key);
    } else {
      if (!Array.isArray(wanted) || wanted.some((k) => typeof k !== 'string')) throw new GraphError('wanted must be an array of keys');
      ({ graph, futures } = resolveGraph(what as Graph));
      keys = wanted;
    }
    this.#futures.check(futures);
    const unique = [...new Set(keys)];
    const accepted = this.#scheduler.inOrder(async () => {
      await Promise.all([...futures].map((future) => this.#futures.accepted(future)));
      const checked = await this.#check(graph, unique);
      if (unique.length === 0) return;
      await this.#scheduler.submit({ graph: checked, wanted: unique }, this.#modules);
      for (const key of unique) this.#holds.submitted.add(key);
    });
    const made = keys.map((key) => this.#futures.create(key, accepted));
    return what instanceof Delayed ? made[0] : made;
  }

  async #compute(graph: Graph, wanted: readonly string[], options: ComputeOptions, futures: Set<Future<unknown>>): Promise<unknown[]> {
    if (this.#lost !== undefined) throw this.#lost;
    const calledAt = this.#holds.call();
    const interval = options.progressIntervalMs ?? 500;
    if (typeof interval !== 'number' || !(interval >= 1 && interval <= 2 ** 31 - 1)) {
      throw new InvalidArgumentError(`progressIntervalMs must be a number of milliseconds from 1 to 2^31-1, got ${String(interval)}`);
    }
    this.#futures.check(futures);
    const keys = Array.isArray(wanted) ? [...new Set(wanted)] : [];
    // Its place among submits and releases is taken now, before anything is awaited.
    const accepted = this.#scheduler.inOrder(async () => {
      await Promise.all([...futures].map((future) => this.#futures.accepted(future)));
      const checked = await this.#check(graph, wanted);
      if (keys.length > 0) await this.#scheduler.submit({ graph: checked, wanted: keys }, this.#modules);
    });
    if (keys.length === 0) {
      await accepted;
      return [];
    }
    const values = new Map<string, unknown>();
    let tasks: ProgressParams | undefined;
    let fail!: (err: Error) => void;
    const progress = (): ComputeProgress => ({ ready: values.size, wanted: keys.length, tasks });
    // A callback that throws fails the computation (not an unhandled rejection).
    const report = (): void => {
      try {
        options.onProgress?.(progress());
      } catch (err) {
        fail(err instanceof Error ? err : new Error(String(err)));
      }
    };
    let finish!: () => void;
    const failed = new Promise<never>((_, reject) => (fail = reject));
    const done = new Promise<void>((resolve) => (finish = resolve));
    failed.catch(() => undefined);
    const computation: Computation = { fail: (err) => fail(err) };
    const waiters = new Map<string, Waiter>();
    for (const key of keys) {
      const waiter: Waiter = {
        // A key can be announced again (recomputed after a worker died): fetch it once.
        ready: (params) => {
          if (!this.#waiters.unwait(key, waiter)) return;
          this.#fetchResult(params).then((value) => {
            values.set(key, value);
            report();
            if (values.size === keys.length) finish();
          }, computation.fail);
        },
        erred: (params) => computation.fail(taskFailure(key, params)),
      };
      waiters.set(key, waiter);
      this.#waiters.wait(key, waiter);
    }
    this.#computations.add(computation);
    // The scheduler knows one "wanted" per client and key: count the computations using each key.
    this.#holds.use(keys);
    let held = true;
    /** Keys `release` asked for meanwhile: released even by a computation that keeps its results. */
    const asked = new Set<string>();
    const unhold = (): string[] => {
      if (!held) return [];
      held = false;
      this.#holds.end(keys, calledAt, options.keep === true, asked);
      // Another computation, an earlier `keep` or a future still needs the rest.
      return this.#holds.unused(keys).filter((key) => !this.#futures.holds(key));
    };
    const toRelease = (releasable: string[]): string[] => (options.keep === true ? releasable.filter((key) => asked.has(key)) : releasable);
    let poller: { stop(): void } | undefined;
    try {
      // Waiters first: a key already computed may be announced before submit answers.
      await Promise.race([accepted, failed]);
      for (const key of keys) this.#holds.submitted.add(key);
      if (options.onProgress !== undefined) {
        poller = pollProgress(
          interval,
          () => this.#scheduler.progress(),
          (counts) => {
            tasks = counts;
            report();
          },
          () => this.#lost !== undefined,
        );
      }
      await Promise.race([done, failed]);
      if (poller !== undefined) {
        // The last word: every task of this computation done. A throw here rejects compute.
        poller.stop();
        tasks = (await this.#scheduler.progress()) ?? tasks;
        options.onProgress?.(progress());
      }
    } catch (err) {
      // A refused graph made nothing wanted, but a key another computation submitted and
      // left to this one (it was still in use here) must still be released.
      const releasable = unhold().filter((key) => !(err instanceof GraphError) || this.#holds.submitted.has(key));
      if (this.#lost === undefined && toRelease(releasable).length > 0) await this.release(toRelease(releasable)).catch(() => undefined);
      throw err;
    } finally {
      poller?.stop();
      this.#computations.delete(computation);
      for (const [key, waiter] of waiters) this.#waiters.unwait(key, waiter);
    }
    const releasable = toRelease(unhold());
    if (releasable.length > 0) await this.release(releasable);
    return wanted.map((key) => values.get(key));
  }

  /**
   * Retires workers (their ids `w-N` or names) as SIGTERM would: each stops taking tasks,
   * hands every key only it holds to the other workers, and exits. Resolves with their ids
   * once every one has left; an unknown name rejects before anything starts.
   */
  async retireWorkers(workers: readonly string[]): Promise<string[]> {
    if (this.#lost !== undefined) throw this.#lost;
    if (!Array.isArray(workers) || !workers.every((w) => typeof w === 'string')) throw new InvalidArgumentError('retireWorkers takes an array of worker ids or names');
    return await this.#scheduler.retireWorkers(workers);
  }

  /**
   * Tells the scheduler this client no longer needs `keys` (kept with `keep: true`). A key a
   * computation of this client still waits for is released when that computation ends; a
   * key a future holds, when the future is released.
   */
  async release(keys: readonly string[]): Promise<void> {
    if (this.#lost !== undefined) throw this.#lost;
    const now = this.#holds.release(keys).filter((key) => !this.#futures.holds(key));
    await this.#releaseNow(now);
  }

  async #releaseNow(keys: string[]): Promise<void> {
    if (keys.length === 0) return;
    for (const key of keys) this.#holds.submitted.delete(key);
    await this.#scheduler.inOrder(() => this.#scheduler.release(keys));
  }

  /**
   * Bundles the module at `url` (a file URL or an absolute path) with its relative imports
   * and sends it to every worker, those that join later included; graphs naming `url` then
   * run it from the workers' caches (docs/code-shipping.md). Modules graphs name that are
   * local files outside installed packages are shipped without this call (`shipModules`).
   * Rejects with ModuleBundleError when it cannot be bundled, ModuleRefusedError outside the
   * scheduler's allow-list.
   */
  async uploadModule(url: string | URL): Promise<ShippedModule> {
    if (this.#lost !== undefined) throw this.#lost;
    return await this.#modules.uploadModule(url);
  }

  /** The graph as it is submitted: the modules it ships uploaded and named by their addresses (src/shipping), every task checked. */
  async #check(graph: Graph, wanted: readonly string[]): Promise<Graph> {
    await checkDefinedFunctions(graph);
    const shipped = await this.#modules.prepare(graph);
    await validateGraph(shipped, wanted, this.#functionChecks);
    return shipped;
  }

  /** Current holders of keys, from the scheduler. */
  whoHas(keys: readonly string[]): Promise<WhoHasResult> {
    return this.#scheduler.whoHas(keys);
  }

  /** Closes the connection (the scheduler releases this client's keys) and the local store. */
  async close(): Promise<void> {
    this.#onLost(new ClosedError('client'));
    this.#channel.close();
    await this.#store.close();
  }

  #fetchResult(params: KeyReadyParams, wanted?: () => boolean): Promise<unknown> {
    return fetchResult(this.#results, params, wanted);
  }

  #dispatch(params: KeyReadyParams | KeyErredParams, kind: 'ready' | 'erred'): void {
    if (kind === 'ready') this.#futures.ready(params as KeyReadyParams);
    else this.#futures.erred(params.key, taskFailure(params.key, params as KeyErredParams));
    this.#waiters.dispatch(params, kind);
  }

  #onLost(err: Error): void {
    if (this.#lost !== undefined) return;
    this.#lost = err;
    for (const c of this.#computations) c.fail(err);
    this.#futures.lost(err);
  }
}
