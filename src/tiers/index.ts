export type { Tier, TierUsage, TierStats, WriteSource, WriteItem, WriteResults, ByteRange, RecyclingStream } from './tier.js';
export { recycleChunk } from './tier.js';
export { DiskTier, type DiskTierOptions } from './disk/disk-tier.js';
export { CompressedMemoryTier, type CompressedMemoryTierOptions } from './compressed-memory.js';
export type { CompressionMode } from './chunks.js';
export { TierWrapper } from './wrappers.js';
