import { SpillCapError, TiersFullError } from '../errors.js';
import { DEMOTE_AT } from './chain.js';
import type { Demoter } from './demoter.js';
import type { StoreState } from './state.js';

/** Where a value going below memory is written: `maxSpill`, then the highest tier with room. */
export class SpillPlacement {
  constructor(
    private readonly state: StoreState,
    private readonly demoter: Demoter,
  ) {}

  /**
   * Checks maxSpill and finds a tier. The bytes count as used from the check on (while a
   * tier makes room), then are reserved on the tier found in the very step that found room
   * (#room), so concurrent writes cannot all pass the same check. The caller releases the
   * reservation.
   */
  async reserve(key: string, bytes: number): Promise<number> {
    this.#checkCap(key, bytes);
    const { chain } = this.state;
    chain.unplaced += bytes;
    try {
      return await this.#room(key, bytes);
    } catch (err) {
      chain.unplaced -= bytes;
      throw err;
    }
  }

  #checkCap(key: string, bytes: number): void {
    const used = this.state.chain.usedBytes();
    const cap = this.state.opts.maxSpill;
    if (used + bytes > cap) {
      this.state.counters.spillCapRejections++;
      throw new SpillCapError(key, bytes, cap, used);
    }
  }

  /**
   * The tier a new value of `bytes` goes to: the highest one with room, after moving its
   * coldest values down when it could hold the new one that way. New spills are the
   * warmest data below memory, so they belong at the top, not at the bottom.
   */
  async #room(key: string, bytes: number): Promise<number> {
    const { chain } = this.state;
    // Reserved in the same synchronous step as the check: reserving after `await #room()`
    // left a gap of a few microtasks in which a concurrent write passed the same check.
    const place = (t: number): number => {
      chain.unplaced -= bytes;
      chain.reserved[t] += bytes;
      return t;
    };
    for (let t = 0; t < chain.tiers.length; t++) {
      if (chain.pick(bytes, t) === t) return place(t);
      if (t + 1 < chain.tiers.length && chain.stored(t, bytes) <= chain.tiers[t].capacity * DEMOTE_AT) {
        await this.demoter.demote(t, bytes);
        if (chain.pick(bytes, t) === t) return place(t);
      }
    }
    throw new TiersFullError(key, bytes);
  }
}
