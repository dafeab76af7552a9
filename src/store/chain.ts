import type { Tier, TierStats } from '../tiers/tier.js';
import type { Entry } from './entry.js';
import { LruList } from './lru.js';

/** A tier starts moving its least recently used values down above this share of its capacity. */
export const DEMOTE_AT = 0.9;

export interface ChainTierStats extends Partial<TierStats> {
  name: string;
  capacity: number;
  count: number;
  bytes: number;
  /** Values moved down from this tier to the next. */
  demotions: number;
}

/**
 * The tiers below memory, in order, each with an LRU of the entries whose copy it holds
 * and the bytes reserved for writes in flight. Spills go to the highest tier with room;
 * a tier past DEMOTE_AT of its capacity hands its coldest values to the next one.
 */
export class TierChain {
  readonly lrus: LruList<Entry>[];
  readonly reserved: Float64Array;
  readonly demotions: Float64Array;
  /** Bytes that passed the maxSpill check but wait for a tier to have room. */
  unplaced = 0;

  constructor(readonly tiers: readonly Tier[]) {
    this.lrus = tiers.map(() => new LruList<Entry>(64));
    this.reserved = new Float64Array(tiers.length);
    this.demotions = new Float64Array(tiers.length);
  }

  /** Bytes stored below memory, all tiers together, plus writes in flight. */
  usedBytes(): number {
    let total = this.unplaced;
    for (let t = 0; t < this.tiers.length; t++) total += this.tiers[t].usage().bytes + this.reserved[t];
    return total;
  }

  /** The bytes tier `t` expects to store for `bytes` of encoded values (less, when it compresses). */
  stored(t: number, bytes: number): number {
    const tier = this.tiers[t];
    return bytes === 0 || tier.estimateStoredBytes === undefined ? bytes : tier.estimateStoredBytes(bytes);
  }

  /** What tier `t` holds and expects to hold once its writes in flight land, plus `incoming` encoded bytes. */
  fill(t: number, incoming = 0): number {
    return this.tiers[t].usage().bytes + this.stored(t, this.reserved[t]) + this.stored(t, incoming);
  }

  /** The first tier at or below `from` with room for `bytes`, or -1. */
  pick(bytes: number, from = 0): number {
    for (let t = from; t < this.tiers.length; t++) {
      if (this.fill(t, bytes) <= this.tiers[t].capacity) return t;
    }
    return -1;
  }

  /** True when tier `t` should move values down (and has somewhere to move them). */
  overfull(t: number): boolean {
    return t + 1 < this.tiers.length && this.fill(t) > this.tiers[t].capacity * DEMOTE_AT;
  }

  link(entry: Entry): void {
    if (entry.copy !== undefined && entry.copySlot < 0) entry.copySlot = this.lrus[entry.copy.tier].push(entry);
  }

  unlink(entry: Entry): void {
    if (entry.copy !== undefined && entry.copySlot >= 0) this.lrus[entry.copy.tier].remove(entry.copySlot);
    entry.copySlot = -1;
  }

  touch(entry: Entry): void {
    if (entry.copy !== undefined && entry.copySlot >= 0) this.lrus[entry.copy.tier].touch(entry.copySlot);
  }

  stats(): ChainTierStats[] {
    return this.tiers.map((tier, t) => ({
      ...tier.stats?.(),
      name: tier.name,
      capacity: tier.capacity,
      ...tier.usage(),
      demotions: this.demotions[t],
    }));
  }
}
