import type { ChainTierStats } from './chain.js';
import type { StoreCounters } from './counters.js';
import { type Accounting, Bucket, type CountBytes } from './entry.js';

/** Per tier: usage, capacity, moves down, and the tier's own counters when it has them. */
export type TierStatsSummary = ChainTierStats;

export interface StoreStats {
  keys: number;
  memoryLimit: number;
  targetBytes: number;
  /** In memory, unpinned, not being written. */
  memory: CountBytes;
  /** In memory and being written below (still readable from memory). */
  spilling: CountBytes;
  /** In memory and held by a lease. */
  pinned: CountBytes;
  /** Dropped by the store but still alive (referenced elsewhere, or not yet collected). */
  detached: CountBytes;
  /** Encoded bytes below memory, all tiers together. */
  disk: CountBytes;
  tiers: TierStatsSummary[];
  /** memory + spilling + pinned + detached bytes. */
  managedBytes: number;
  process: { rss: number; heapUsed: number; external: number; arrayBuffers: number };
  /** Process RSS not accounted for by managed values (never negative). */
  unmanaged: number;
  paused: boolean;
  counters: StoreCounters;
}

/** Emitted as 'unspillable' when memory is over target and nothing more can be spilled now. */
export interface UnspillableEvent {
  residentBytes: number;
  targetBytes: number;
  pinned: CountBytes;
  memory: CountBytes;
  /**
   * all-pinned: every resident value is held by a lease; unencodable: the rest cannot be
   * encoded; write-failures: writes failed and wait for their retry; unmanaged: process
   * RSS is over the pause level but nothing is left to spill (memory the store does not
   * manage holds it up, so the store does not pause for nothing).
   */
  reason: 'all-pinned' | 'unencodable' | 'write-failures' | 'unmanaged';
  /** Process RSS, with reason 'unmanaged'. */
  rss?: number;
}

export function buildStats(input: {
  acct: Accounting;
  counters: StoreCounters;
  tiers: ChainTierStats[];
  paused: boolean;
  keys: number;
  memoryLimit: number;
  targetBytes: number;
}): StoreStats {
  const { acct } = input;
  const tiers = input.tiers;
  const disk = tiers.reduce((sum, t) => ({ count: sum.count + t.count, bytes: sum.bytes + t.bytes }), { count: 0, bytes: 0 });
  const mem = process.memoryUsage();
  const managedBytes = acct.residentBytes + acct.bytes[Bucket.Detached];
  return {
    keys: input.keys,
    memoryLimit: input.memoryLimit,
    targetBytes: input.targetBytes,
    memory: acct.get(Bucket.Memory),
    spilling: acct.get(Bucket.Spilling),
    pinned: acct.get(Bucket.Pinned),
    detached: acct.get(Bucket.Detached),
    disk,
    tiers,
    managedBytes,
    process: { rss: mem.rss, heapUsed: mem.heapUsed, external: mem.external, arrayBuffers: mem.arrayBuffers },
    unmanaged: Math.max(0, mem.rss - managedBytes),
    paused: input.paused,
    counters: { ...input.counters },
  };
}
