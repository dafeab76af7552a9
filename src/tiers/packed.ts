import type { Tier, WriteResults } from './tier.js';

/**
 * Packed batches: the store's own fast path for spilling many small values to a tier
 * that appends them to one file (DiskTier's fused segments). Not part of the public `Tier`
 * contract (a third-party tier implements `writeMany`): a tier offers it under this
 * symbol, and the store uses it for a batch that fits its limits.
 *
 * Why: with `writeMany`, each value is an item with an array of its pieces, which the tier
 * walks to check the length and the segment walks again to join neighbours for the
 * `writev`. Those walks over per-value objects, which the batch's own bytes have pushed
 * out of the cache by then, cost more than the store's other per-value work when it
 * spills many small values. A packed batch is the values' bytes back to back plus two
 * arrays of numbers.
 */
export const writePacked: unique symbol = Symbol('spillway.writePacked');

export interface PackedBatch {
  /** One id per value, in order. */
  readonly ids: readonly number[];
  /** Each value's length in bytes, in order. */
  readonly lengths: readonly number[];
  /**
   * Every value's bytes, back to back in order (a piece may hold the end of one value and
   * the start of the next). Valid until the call settles, like `writeMany`'s.
   */
  readonly pieces: readonly Uint8Array[];
  /** The sum of `lengths`. */
  readonly byteLength: number;
}

export interface PackedWrites {
  /** Batches of more bytes than this go through `writeMany`. */
  readonly maxBatchBytes: number;
  /** Values of this many bytes or more go through `writeMany`. */
  readonly valueBytesBelow: number;
  /**
   * Stores the batch's values under their ids. Each value obeys `write`'s rules on its own
   * (a bad or duplicate id fails that value alone; its bytes become dead space); resolves
   * with one result per value, as `writeMany` does. Rejects as a whole, storing nothing,
   * when the pieces do not hold `byteLength` bytes, the lengths do not match the ids, the
   * batch is over the limits, or the tier is closed.
   */
  write(batch: PackedBatch): Promise<WriteResults>;
}

/** A tier that takes packed batches. */
export interface PackedTier {
  readonly [writePacked]?: PackedWrites;
}

/** The tier's packed writes, if it offers them. */
export function packedWritesOf(tier: Tier): PackedWrites | undefined {
  return (tier as Tier & PackedTier)[writePacked];
}
