import type { KeyErredParams, KeyReadyParams } from '../cluster/protocol.js';

/** One computation's interest in a key: told when the scheduler says it is ready or erred. */
export interface Waiter {
  ready(params: KeyReadyParams): void;
  erred(params: KeyErredParams): void;
}

/** The computations waiting for each key, told of its key-ready and key-erred. */
export class KeyWaiters {
  readonly #waiters = new Map<string, Set<Waiter>>();

  wait(key: string, waiter: Waiter): void {
    let set = this.#waiters.get(key);
    if (set === undefined) this.#waiters.set(key, (set = new Set()));
    set.add(waiter);
  }

  /** Stops waiting; false if the waiter was not waiting for `key` (any more). */
  unwait(key: string, waiter: Waiter): boolean {
    const set = this.#waiters.get(key);
    const had = set?.delete(waiter) ?? false;
    if (set?.size === 0) this.#waiters.delete(key);
    return had;
  }

  dispatch(params: KeyReadyParams | KeyErredParams, kind: 'ready' | 'erred'): void {
    const set = this.#waiters.get(params.key);
    if (set === undefined) return;
    for (const waiter of [...set]) {
      if (kind === 'ready') waiter.ready(params as KeyReadyParams);
      else waiter.erred(params as KeyErredParams);
    }
  }
}
