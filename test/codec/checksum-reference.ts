import { xxh64Portable } from '../../src/codec/xxh64.js';

/**
 * The value checksum computed from its definition (docs/protocol.md#checksum) with the
 * portable XXH64, independently of the codec's hasher: XXH64 of the bytes before
 * align8(16 + 8F + H), then XXH64 of the rest of `hashed` seeded with that digest.
 */
export function referenceChecksum(hashed: Uint8Array): bigint {
  const view = new DataView(hashed.buffer, hashed.byteOffset, hashed.byteLength);
  const bodyStart = Math.ceil((16 + 8 * view.getUint32(12, true) + view.getUint32(8, true)) / 8) * 8;
  return xxh64Portable(hashed.subarray(bodyStart), xxh64Portable(hashed.subarray(0, bodyStart)));
}

/** The 8 trailer bytes (u64 LE) holding `checksum`. */
export function trailerBytes(checksum: bigint): Buffer {
  const out = Buffer.alloc(8);
  out.writeBigUInt64LE(checksum);
  return out;
}
