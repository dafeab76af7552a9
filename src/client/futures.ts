import type { KeyReadyParams } from '../cluster/protocol.js';
import { InvalidArgumentError, describeKey } from '../errors.js';
import { FutureReleasedError } from './errors.js';

/** Where a future stands: running (or queued), its result on the cluster, failed, or no longer usable. */
export type FutureStatus = 'pending' | 'finished' | 'error' | 'cancelled' | 'released';

/** What a future asks of the client that made it. @internal */
export interface FutureHost {
  status(future: Future<unknown>): FutureStatus;
  result(future: Future<unknown>): Promise<unknown>;
  release(future: Future<unknown>, reason: 'released' | 'cancelled'): Promise<void>;
}

/**
 * A task's result on the cluster, held for this client until the future is released
 * (`release()`, `cancel()`, or the end of a `using` block). Pass it to other tasks as an
 * argument (its data moves worker to worker, never through the client); `await
 * future.result()` fetches the value. Not a promise: `await future` gives the future itself.
 */
export class Future<T> {
  /** The key of its result on the cluster. */
  readonly key: string;
  readonly #host: FutureHost;
  // Never set: it makes a Future<string> different from a Future<number> to the compiler.
  /** @internal */
  declare readonly __result?: T;

  /** @internal Made by `client.submit`, `map` and `persist`. */
  constructor(key: string, host: FutureHost) {
    this.key = key;
    this.#host = host;
  }

  get status(): FutureStatus {
    return this.#host.status(this);
  }

  /**
   * The value, fetched from a worker that holds it (each call fetches it again). Rejects with
   * the task's error (TaskError, KilledWorkerError...), a GraphError if its graph was refused,
   * or FutureReleasedError once this future is released or cancelled.
   */
  result(): Promise<T> {
    return this.#host.result(this) as Promise<T>;
  }

  /**
   * Stops the computation unless something else needs it, and releases the result: every
   * future of this key in this client becomes unusable (their pending `result()` calls reject
   * with FutureReleasedError).
   */
  cancel(): Promise<void> {
    return this.#host.release(this, 'cancelled');
  }

  /**
   * Lets go of this future: once no future, computation or `keep` of this client needs its
   * key, the scheduler forgets it and the workers free its data. Using it afterwards throws
   * FutureReleasedError. Releasing twice is harmless.
   */
  release(): Promise<void> {
    return this.#host.release(this, 'released');
  }

  /** `using future = client.submit(...)`: released at the end of the block. */
  [Symbol.dispose](): void {
    this.release().catch(() => undefined);
  }

  /** `await using future = client.submit(...)`: released (and the scheduler told) at the end of the block. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }

  toString(): string {
    return `Future(${describeKey(this.key)}, ${this.status})`;
  }
}

interface Waiter {
  state: FutureState;
  resolve(params: KeyReadyParams): void;
  reject(err: Error): void;
}

/** This client's claim on one key: how many futures hold it, and what the scheduler last said of it. */
interface Claim {
  readonly key: string;
  /** Live futures of the key (released, cancelled and collected ones no longer count). */
  count: number;
  /** `cancel()` ended every future of it. */
  cancelled: boolean;
  ready: KeyReadyParams | undefined;
  error: Error | undefined;
  readonly waiters: Set<Waiter>;
}

/** One future's own state; it never refers to the future, so a future nobody holds can be collected. */
interface FutureState {
  readonly claim: Claim;
  refused: Error | undefined;
  dropped: 'released' | 'cancelled' | undefined;
  /** The submit that made the key wanted: rejected with why the graph was refused. */
  readonly accepted: Promise<void>;
}

/** What the registry needs of its client. */
export interface FutureClient {
  /** Pulls a result from its holders; `wanted()` false stops looking. */
  fetch(params: KeyReadyParams, wanted: () => boolean): Promise<unknown>;
  /** No future holds these keys any more (the client releases those nothing else holds). */
  unclaimed(keys: string[]): Promise<void>;
  /** Why the client cannot be used (closed, scheduler lost), if it cannot. */
  lost(): Error | undefined;
}

/**
 * The futures of one client, by key: several futures may share a key (equal tasks), and the
 * key is released when the last of them is released, or collected by the garbage collector
 * once the program can no longer reach it (as Dask releases a future nobody refers to).
 */
export class FutureRegistry implements FutureHost {
  readonly #claims = new Map<string, Claim>();
  readonly #states = new WeakMap<Future<unknown>, FutureState>();
  readonly #client: FutureClient;
  // A collected future has nobody to tell of a failed release: the key then stays held until the client closes.
  readonly #collected = new FinalizationRegistry<FutureState>((state) => void this.#drop(state, 'released').catch(() => undefined));

  constructor(client: FutureClient) {
    this.#client = client;
  }

  /** A future of `key`, made wanted by the submit `accepted`. */
  create<T>(key: string, accepted: Promise<void>): Future<T> {
    let claim = this.#claims.get(key);
    if (claim === undefined) this.#claims.set(key, (claim = { key, count: 0, cancelled: false, ready: undefined, error: undefined, waiters: new Set() }));
    claim.count++;
    const state: FutureState = { claim, refused: undefined, dropped: undefined, accepted };
    const future = new Future<T>(key, this);
    this.#states.set(future, state);
    this.#collected.register(future, state, state);
    accepted.catch((err: unknown) => {
      state.refused = err instanceof Error ? err : new Error(String(err));
      for (const waiter of [...state.claim.waiters]) if (waiter.state === state) this.#settle(waiter, state.refused);
    });
    return future;
  }

  /** True while a live future of this client holds `key`. */
  holds(key: string): boolean {
    return this.#claims.has(key);
  }

  /** Throws unless every future is this client's and usable: FutureReleasedError, InvalidArgumentError. */
  check(futures: Iterable<Future<unknown>>): void {
    for (const future of futures) {
      const state = this.#states.get(future);
      if (state === undefined) throw new InvalidArgumentError(`${future.toString()} belongs to another client: pass its data by computing it in this client's graph`);
      const dropped = droppedAs(state);
      if (dropped !== undefined) throw new FutureReleasedError(future.key, dropped);
    }
  }

  /** The submit of a future named by a later graph: that graph fails with its error. */
  accepted(future: Future<unknown>): Promise<void> {
    return this.#states.get(future)?.accepted ?? Promise.resolve();
  }

  ready(params: KeyReadyParams): void {
    const claim = this.#claims.get(params.key);
    if (claim === undefined) return;
    claim.ready = params;
    claim.error = undefined;
    for (const waiter of [...claim.waiters]) this.#settle(waiter, params);
  }

  erred(key: string, error: Error): void {
    const claim = this.#claims.get(key);
    if (claim === undefined) return;
    claim.error = error;
    claim.ready = undefined;
    for (const waiter of [...claim.waiters]) this.#settle(waiter, error);
  }

  /** The client is closed or lost its scheduler: every pending `result()` rejects with `err`. */
  lost(err: Error): void {
    for (const claim of this.#claims.values()) for (const waiter of [...claim.waiters]) this.#settle(waiter, err);
  }

  status(future: Future<unknown>): FutureStatus {
    const state = this.#states.get(future);
    if (state === undefined) return 'released';
    const dropped = droppedAs(state);
    if (dropped !== undefined) return dropped;
    if (state.refused !== undefined || state.claim.error !== undefined) return 'error';
    return state.claim.ready !== undefined ? 'finished' : 'pending';
  }

  async result(future: Future<unknown>): Promise<unknown> {
    this.check([future]);
    const lost = this.#client.lost();
    if (lost !== undefined) throw lost;
    const state = this.#states.get(future) as FutureState;
    const { claim } = state;
    const params = await new Promise<KeyReadyParams>((resolve, reject) => {
      if (state.refused !== undefined) return reject(state.refused);
      if (claim.error !== undefined) return reject(claim.error);
      if (claim.ready !== undefined) return resolve(claim.ready);
      claim.waiters.add({ state, resolve, reject });
    });
    try {
      return await this.#client.fetch(params, () => droppedAs(state) === undefined);
    } catch (err) {
      const dropped = droppedAs(state);
      if (dropped !== undefined) throw new FutureReleasedError(future.key, dropped);
      throw err;
    }
  }

  async release(future: Future<unknown>, reason: 'released' | 'cancelled'): Promise<void> {
    const state = this.#states.get(future);
    if (state === undefined) return;
    this.#collected.unregister(state);
    await this.#drop(state, reason);
  }

  /** Ends a future: cancelling ends every future of its key, releasing only this one. The key is released with the last. */
  async #drop(state: FutureState, reason: 'released' | 'cancelled'): Promise<void> {
    const { claim } = state;
    if (droppedAs(state) !== undefined) return;
    state.dropped = reason;
    claim.count--;
    if (reason === 'cancelled') {
      claim.cancelled = true;
      claim.count = 0;
    }
    for (const waiter of [...claim.waiters]) {
      if (reason === 'cancelled' || waiter.state === state) this.#settle(waiter, new FutureReleasedError(claim.key, reason));
    }
    if (claim.count > 0 || this.#claims.get(claim.key) !== claim) return;
    this.#claims.delete(claim.key);
    if (this.#client.lost() === undefined) await this.#client.unclaimed([claim.key]);
  }

  #settle(waiter: Waiter, outcome: KeyReadyParams | Error): void {
    waiter.state.claim.waiters.delete(waiter);
    if (outcome instanceof Error) waiter.reject(outcome);
    else waiter.resolve(outcome);
  }
}

/** How a future ended, if it did: its own release, or a cancel of its key. */
function droppedAs(state: FutureState): 'released' | 'cancelled' | undefined {
  return state.dropped ?? (state.claim.cancelled ? 'cancelled' : undefined);
}
