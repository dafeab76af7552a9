import type { DataAddress, KeyReadyParams, WhoHasResult } from '../cluster/protocol.js';
import type { SpillStore } from '../store/spill-store.js';
import type { DataClient } from '../transfer/client.js';
import { FutureReleasedError, ResultUnavailableError } from './errors.js';

/** What fetching a result needs of the client. */
export interface ResultSource {
  readonly store: SpillStore;
  readonly data: DataClient;
  readonly timeoutMs: number;
  whoHas(keys: readonly string[]): Promise<WhoHasResult>;
  /** Why the client cannot be used (closed, scheduler lost), if it cannot. */
  lost(): Error | undefined;
}

/**
 * Pulls one result into the client's store from a holder, then out of it; when every holder
 * fails (they are gone and the scheduler recomputes the key) asks where it is now, until
 * `timeoutMs`. `wanted()` false (its future was released) stops it.
 */
export async function fetchResult(source: ResultSource, params: KeyReadyParams, wanted: () => boolean = () => true): Promise<unknown> {
  const deadline = Date.now() + source.timeoutMs;
  let holders: DataAddress[] = params.holders;
  let lastError: unknown;
  for (;;) {
    for (const holder of holders) {
      const lost = source.lost();
      if (lost !== undefined) throw lost;
      if (!wanted()) throw new FutureReleasedError(params.key, 'released');
      try {
        const result = await source.data.fetch(holder, [params.key], source.store);
        if (result.missing.length > 0) continue;
        const value = await source.store.get(params.key);
        source.store.delete(params.key);
        return value;
      } catch (err) {
        lastError = err;
      }
    }
    if (Date.now() > deadline) throw new ResultUnavailableError(params.key, lastError);
    await new Promise((resolve) => setTimeout(resolve, 250));
    const lost = source.lost();
    if (lost !== undefined) throw lost;
    holders = (await source.whoHas([params.key]))[params.key] ?? [];
  }
}
