import type { Readable } from 'node:stream';

/**
 * The bytes of one encoded value, in order, as batches (a batch is written with one
 * `writev`). Produced lazily: a tier that asks for the next batch while the previous one
 * is being written lets the producer hash it in parallel with the I/O. A tier may hold on
 * to the pieces until its write settles (DiskTier hands a small value's pieces straight to
 * one writev), so a source must not change or reuse them before then.
 */
export type WriteSource = AsyncIterable<readonly Uint8Array[]>;

/** One value of a `writeMany` call. */
export interface WriteItem {
  readonly id: number;
  /**
   * The value's bytes, in order. They may be views over the caller's memory (often one
   * buffer shared by the whole batch) and stay valid until `writeMany` settles: copy what
   * you keep.
   */
  readonly bytes: readonly Uint8Array[];
  readonly byteLength: number;
}

/** What `writeMany` resolves with: one result per item, in order. */
export type WriteResults = PromiseSettledResult<void>[];

export interface TierUsage {
  /** Values held. */
  count: number;
  /** Bytes held (what the tier actually stores for them). */
  bytes: number;
}

/**
 * Counters a tier reports through its optional `stats()`. Byte counts are of encoded
 * values ("logical") unless they say stored; seconds are summed over calls, so they can
 * exceed wall time when calls overlap.
 */
export interface TierStats {
  /** Values held (as `usage().count`). */
  count: number;
  /** Bytes stored for them, after compression (as `usage().bytes`). */
  bytes: number;
  /** Bytes of the values held, before compression. */
  logicalBytes: number;
  /** `logicalBytes / bytes` (1 when empty or nothing compressed). */
  compressionRatio: number;
  reads: number;
  writes: number;
  deletes: number;
  failedWrites: number;
  /** Logical bytes returned by `read` and read streams. */
  bytesRead: number;
  /** Logical bytes accepted by successful writes. */
  bytesWritten: number;
  readSeconds: number;
  writeSeconds: number;
  /** Over all successful writes: bytes before and after compression. */
  bytesBeforeCompression: number;
  bytesAfterCompression: number;
  /** Tier-specific figures (segment files, compactions, file bytes...). */
  details: Record<string, number>;
}

/** Byte range of an encoded value: `start` inclusive, `end` exclusive. */
export interface ByteRange {
  start?: number;
  end?: number;
}

/**
 * A byte store for encoded values, keyed by ids the SpillStore chooses (never reused
 * while a value with that id may exist). Tiers know nothing about keys or objects.
 * Every method is asynchronous and must never block the event loop. See docs/tiers.md.
 */
export interface Tier {
  /** Unique within a store; what `store.where(key)` reports. */
  readonly name: string;
  /** Byte budget; `Infinity` for none. */
  readonly capacity: number;
  /** Prepares the tier (create its directory...). Called once by `SpillStore.open`. */
  open(): Promise<void>;
  /**
   * Stores `byteLength` bytes under `id`. Resolves once they are readable. On failure it
   * must leave nothing behind and reject; the store keeps the value where it was.
   */
  write(id: number, source: WriteSource, byteLength: number): Promise<void>;
  /**
   * Optional: stores many (small) values in one call, for a tier that can do that more
   * cheaply than one `write` each (DiskTier: one reservation and one `writev`). Each item
   * obeys `write`'s rules on its own, and one failed item must not fail the others: the
   * result for an item is fulfilled once it is readable, rejected when nothing of it is
   * stored. If the call rejects as a whole, none of the items may be stored. The store
   * uses it for batches of small values when the tier has it; otherwise one `write` each.
   */
  writeMany?(items: readonly WriteItem[]): Promise<WriteResults>;
  /**
   * Reads a whole value into one buffer whose start is 8-byte aligned (so typed arrays
   * can view it). `onChunk` sees consecutive pieces as they land, so the caller can hash
   * while the rest is read.
   */
  read(id: number, onChunk?: (chunk: Uint8Array) => void): Promise<Uint8Array>;
  /**
   * Optional: reads a whole value into `out`, the caller's buffer of exactly the value's
   * size (any other size rejects with `InvalidArgumentError`). For a caller that owns the
   * memory the bytes go to, such as `SpillStore.take` reading into a pooled buffer: the
   * bytes land in place, with no buffer of the tier's and no copy out of a stream. Without
   * it, the store reads such values through `createReadStream`.
   */
  readInto?(id: number, out: Uint8Array): Promise<void>;
  /**
   * Streams the stored bytes (or a range of them) without holding the whole value. The
   * stream may have a `recycle(chunk)` method (see `RecyclingStream`): a consumer that is
   * done with a chunk (e.g. the socket wrote it) hands it back, so the next read reuses the
   * memory instead of allocating, and serving a large value costs a few buffers, not a
   * garbage collector's worth.
   */
  createReadStream(id: number, range?: ByteRange): Readable;
  /** Removes a value; deleting an id that is not there is not an error. */
  delete(id: number): Promise<void>;
  usage(): TierUsage;
  /**
   * Optional, for a tier that stores values in fewer bytes than their encoded length
   * (compression): the bytes it expects to store for a value of `byteLength`. The store
   * admits values to the tier and moves them down by this estimate and `usage().bytes`,
   * so `capacity` bounds what the tier holds, not what it was given. Without it, a value
   * costs its encoded length.
   */
  estimateStoredBytes?(byteLength: number): number;
  /** Optional counters for the store's per-tier metrics. */
  stats?(): TierStats;
  /** Removes everything this tier wrote. */
  close(): Promise<void>;
}

/** A read stream whose consumer may give chunks back for reuse once it no longer needs them. */
export interface RecyclingStream extends Readable {
  recycle(chunk: Uint8Array): void;
}

/** Hands `chunk` back to `stream` if it takes chunks back; otherwise does nothing. */
export function recycleChunk(stream: Readable, chunk: Uint8Array): void {
  (stream as Partial<RecyclingStream>).recycle?.(chunk);
}
