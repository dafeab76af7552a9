import { SpillwayError } from '../errors.js';
import type { SpillStore } from '../store/spill-store.js';

/**
 * Counts the store's errors by code, for the heartbeat. Spill and read failures lose no
 * data (the store keeps the value), so listening here also keeps them from crashing the worker.
 */
export class StoreErrorCounts {
  readonly #counts: Record<string, number> = {};

  constructor(store: SpillStore) {
    store.on('error', (err: unknown) => {
      const code = err instanceof SpillwayError ? err.code : 'UNKNOWN';
      this.#counts[code] = (this.#counts[code] ?? 0) + 1;
    });
  }

  /** A copy of the counts so far. */
  byCode(): Record<string, number> {
    return { ...this.#counts };
  }
}
