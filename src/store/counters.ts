/** Cumulative counters reported by `stats().counters`. */
export interface StoreCounters {
  /** Values written to a tier. */
  diskWrites: number;
  /** Values read back from a tier. */
  diskReads: number;
  /** Encoded bytes written to tiers (spills, and encoded values received with putEncoded). */
  spilledBytes: number;
  /** Encoded bytes read back into memory. */
  unspilledBytes: number;
  writeSeconds: number;
  readSeconds: number;
  /** Laying values out and hashing them while they are written. */
  encodeSeconds: number;
  /** Checking checksums of values read back, and rebuilding them. */
  decodeSeconds: number;
  /** Values dropped from memory (their copy below stays). */
  evictions: number;
  /** Bytes of values set with `owned` that were freed the moment the store let go of them, with no collection. */
  freedBytes: number;
  /** get/peek/acquire served by a value dropped but still alive (no disk read). */
  weakHits: number;
  /** Loads that were shared by concurrent readers instead of reading again. */
  sharedLoads: number;
  writeErrors: number;
  readErrors: number;
  codecErrors: number;
  checksumErrors: number;
  /** Spills refused because of maxSpill. */
  spillCapRejections: number;
  /** Encoded bytes streamed out by createReadStream, by where they came from. */
  streamedFromMemoryBytes: number;
  streamedFromTierBytes: number;
  /** Garbage collections the store ran under memory pressure (collectGarbage option), and their time. */
  collections: number;
  collectionSeconds: number;
}

export function newCounters(): StoreCounters {
  return {
    diskWrites: 0,
    diskReads: 0,
    spilledBytes: 0,
    unspilledBytes: 0,
    writeSeconds: 0,
    readSeconds: 0,
    encodeSeconds: 0,
    decodeSeconds: 0,
    evictions: 0,
    freedBytes: 0,
    weakHits: 0,
    sharedLoads: 0,
    writeErrors: 0,
    readErrors: 0,
    codecErrors: 0,
    checksumErrors: 0,
    spillCapRejections: 0,
    streamedFromMemoryBytes: 0,
    streamedFromTierBytes: 0,
    collections: 0,
    collectionSeconds: 0,
  };
}

/** Seconds since `start` (a performance.now() reading). */
export function secondsSince(start: number): number {
  return (performance.now() - start) / 1000;
}
