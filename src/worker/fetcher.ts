import { type DataAddress, Methods, type WhoHasResult } from '../cluster/protocol.js';
import { ClosedError } from '../errors.js';
import type { SpillStore } from '../store/spill-store.js';
import type { DataClient } from '../transfer/client.js';
import type { SchedulerLink } from './scheduler-link.js';

/** Keys nobody could deliver, each with the holders that were tried. */
export type MissingKeys = Map<string, DataAddress[]>;

export interface FetcherOptions {
  client: DataClient;
  store: SpillStore;
  /** This worker's own DataServer: never a holder to fetch from. */
  self: DataAddress;
  /** Asked who holds keys now. */
  scheduler: Pick<SchedulerLink, 'request'>;
}

const sameAddress = (a: DataAddress, b: DataAddress): boolean => a.host === b.host && a.port === b.port;
const addressKey = (a: DataAddress): string => `${a.host}:${a.port}`;

/**
 * Gets a task's inputs from the workers holding them, batched per holder (one request
 * carries many keys). A holder that is busy, dead or no longer has a key is replaced by
 * the next one the scheduler named, then by a fresh 'who-has' answer. Concurrent asks for
 * the same key share one transfer.
 */
export class Fetcher {
  readonly #inflight = new Map<string, Promise<MissingKeys>>();
  /** Fetches in progress, per holder address: aborted when the scheduler removes that holder. */
  readonly #active = new Map<string, Set<AbortController>>();
  /** Holders the scheduler removed: skipped until a who-has answer names them again (re-registered). */
  readonly #gone = new Set<string>();
  /** Fetches that failed and were retried elsewhere, for stats and tests. */
  failures = 0;
  /** Bytes fetched from peers, by where they went: decoded into memory, or written to disk as they came. */
  readonly received = { memory: 0, disk: 0 };
  /** Keys this worker holds only as copies fetched from peers (the scheduler does not know of them). */
  readonly replicas = new Set<string>();

  constructor(private readonly options: FetcherOptions) {}

  /**
   * The scheduler removed the worker serving at `address`: fetches from it are abandoned
   * (a frozen peer would hold them until the idle timeout) and it is no longer tried.
   */
  holderRemoved(address: DataAddress): void {
    const key = addressKey(address);
    this.#gone.add(key);
    for (const controller of this.#active.get(key) ?? []) controller.abort(new Error('the scheduler removed this worker'));
  }

  /** Makes every key local; resolves the ones that could not be had (empty when all arrived). */
  async ensure(keys: readonly string[], deps: Readonly<Record<string, DataAddress[]>>): Promise<MissingKeys> {
    const { store } = this.options;
    const waits: Promise<MissingKeys>[] = [];
    const mine: string[] = [];
    for (const key of new Set(keys)) {
      if (store.has(key)) continue;
      const inflight = this.#inflight.get(key);
      if (inflight !== undefined) waits.push(inflight);
      else mine.push(key);
    }
    if (mine.length > 0) {
      const job = this.#fetch(mine, deps);
      for (const key of mine) this.#inflight.set(key, job);
      const forget = (): void => {
        for (const key of mine) if (this.#inflight.get(key) === job) this.#inflight.delete(key);
      };
      job.then(forget, forget);
      waits.push(job);
    }
    const missing: MissingKeys = new Map();
    for (const result of await Promise.all(waits)) {
      for (const [key, holders] of result) if (keys.includes(key)) missing.set(key, holders);
    }
    return missing;
  }

  async #fetch(keys: string[], deps: Readonly<Record<string, DataAddress[]>>): Promise<MissingKeys> {
    const { store, self } = this.options;
    const candidates = new Map<string, DataAddress[]>();
    const failed = new Map<string, DataAddress[]>();
    const asked = new Set<string>();
    for (const key of keys) {
      const named = deps[key] ?? [];
      candidates.set(key, named.filter((a) => !sameAddress(a, self)));
      failed.set(key, withSelfIfNamed([], named, self));
    }
    const missing: MissingKeys = new Map();
    let pending = keys;
    while (pending.length > 0) {
      if (store.closed) throw new ClosedError();
      pending = pending.filter((key) => !store.has(key));
      await this.#askScheduler(pending.filter((key) => candidates.get(key)?.length === 0 && !asked.has(key)), candidates, failed, asked);
      const groups = new Map<string, { holder: DataAddress; keys: string[] }>();
      // Keys whose every holder named with the task is gone: the scheduler is asked next round.
      const reask: string[] = [];
      for (const key of pending) {
        const list = candidates.get(key) ?? [];
        let holder = list.shift();
        while (holder !== undefined && this.#gone.has(addressKey(holder))) holder = list.shift();
        if (holder === undefined && !asked.has(key)) {
          reask.push(key);
          continue;
        }
        if (holder === undefined) {
          missing.set(key, failed.get(key) ?? []);
          continue;
        }
        const group = groups.get(addressKey(holder)) ?? { holder, keys: [] };
        group.keys.push(key);
        groups.set(addressKey(holder), group);
      }
      const retry = await Promise.all([...groups.values()].map((group) => this.#fetchGroup(group.holder, group.keys)));
      pending = reask;
      retry.forEach((keysToRetry, i) => {
        const holder = [...groups.values()][i].holder;
        for (const key of keysToRetry) {
          failed.get(key)?.push(holder);
          pending.push(key);
        }
      });
    }
    return missing;
  }

  /** One batched get-data from one holder; resolves the keys still to be had (all of them when it failed). */
  async #fetchGroup(holder: DataAddress, keys: string[]): Promise<string[]> {
    const key = addressKey(holder);
    const controller = new AbortController();
    const active = this.#active.get(key) ?? new Set();
    active.add(controller);
    this.#active.set(key, active);
    try {
      const result = await this.options.client.fetch(holder, keys, this.options.store, { signal: controller.signal });
      for (const fetched of result.fetched) this.replicas.add(fetched);
      this.received.disk += result.toDiskBytes;
      this.received.memory += result.bytes - result.toDiskBytes;
      return result.missing;
    } catch (err) {
      if (err instanceof ClosedError) throw err;
      // Busy, dead, unreachable, timed out, removed, bad bytes: the fetch stored nothing; try elsewhere.
      this.failures++;
      return keys;
    } finally {
      active.delete(controller);
      if (active.size === 0 && this.#active.get(key) === active) this.#active.delete(key);
    }
  }

  async #askScheduler(keys: string[], candidates: Map<string, DataAddress[]>, failed: Map<string, DataAddress[]>, asked: Set<string>): Promise<void> {
    if (keys.length === 0) return;
    for (const key of keys) asked.add(key);
    let answer: WhoHasResult;
    try {
      answer = await this.options.scheduler.request<WhoHasResult>(Methods.whoHas, { keys }, 30_000);
    } catch {
      return; // scheduler unreachable: these keys are missing; losing it shuts the worker down anyway
    }
    // A holder the scheduler names now is registered (again): no longer gone.
    for (const key of keys) for (const address of answer[key] ?? []) this.#gone.delete(addressKey(address));
    for (const key of keys) {
      const tried = withSelfIfNamed(failed.get(key) ?? [], answer[key] ?? [], this.options.self);
      failed.set(key, tried);
      candidates.set(
        key,
        (answer[key] ?? []).filter((a) => !sameAddress(a, this.options.self) && !tried.some((t) => sameAddress(t, a))),
      );
    }
  }
}

/**
 * `failed` (holders that did not deliver a key), with this worker added when `holders` name
 * it: named as a holder of a key its store lacks (a task that read it last took it, or it
 * was released meanwhile), it is among the holders that failed, so the scheduler stops
 * counting on its copy rather than send the task back here.
 */
function withSelfIfNamed(failed: DataAddress[], holders: readonly DataAddress[], self: DataAddress): DataAddress[] {
  if (holders.some((a) => sameAddress(a, self)) && !failed.some((t) => sameAddress(t, self))) failed.push(self);
  return failed;
}
