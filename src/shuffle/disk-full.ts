import type { SpillStore } from '../store/spill-store.js';
import { ShuffleDiskFullError } from './errors.js';

/**
 * Watches a store's spill failures for a full disk, so that a push waiting for the paused
 * store is refused once spilling has kept failing for lack of room rather than held forever.
 */
export class DiskFullWatch {
  /** When the store last failed to spill for lack of room. */
  #lastDiskFull = 0;
  #lastDiskError: unknown;

  constructor(store: SpillStore) {
    store.on('error', (err: unknown) => {
      if (isDiskFull(err)) {
        this.#lastDiskFull = Date.now();
        this.#lastDiskError = err;
      }
    });
  }

  /**
   * The error refusing a push that has waited since `started` for longer than `waitMs`,
   * the disk having refused spilled bytes meanwhile (or in the second before); else undefined.
   */
  refusal(started: number, waitMs: number): ShuffleDiskFullError | undefined {
    const diskFull = this.#lastDiskFull >= started - 1000 && Date.now() - started > waitMs;
    if (!diskFull) return undefined;
    const cause = this.#lastDiskError instanceof Error ? `: ${this.#lastDiskError.message}` : '';
    return new ShuffleDiskFullError(`this worker's memory is full and its disk refuses more spilled bytes${cause}`);
  }
}

function isDiskFull(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (code === 'ENOSPC' || code === 'EDQUOT' || /ENOSPC|no space left/i.test(e.message)) return true;
    if (code === 'SPW_ERR_SPILL_CAP' || code === 'SPW_ERR_TIERS_FULL' || code === 'SPW_ERR_DISK_FULL') return true;
  }
  return false;
}
