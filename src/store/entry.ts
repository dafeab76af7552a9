/** Where a key's value sits below memory: which tier, under which id, how many bytes. */
export class StoredCopy {
  /** Loads, streams and moves reading this copy; its deletion waits for them. */
  readers = 0;
  /** No entry refers to it any more: delete it once the last reader is done. */
  orphaned = false;
  constructor(
    readonly tier: number,
    readonly id: number,
    /** Encoded length (what a read returns), whatever the tier stores. */
    readonly bytes: number,
  ) {}
}

/** A write of this entry's value to a tier, in flight. */
export interface WriteJob {
  readonly id: number;
  /** Set when the key is deleted or overwritten mid-write: the finished file is removed. */
  cancelled: boolean;
  /** evict() asked for it: drop the value once written, whatever the memory level. */
  force: boolean;
  done: Promise<number>;
}

/** Fields few entries ever set, kept out of the Entry itself (8 bytes each on every entry). */
class RareFields {
  weak: WeakRef<object> | undefined = undefined;
  unspillable = false;
  retryAfter = 0;
}

const RESIDENT = 1;
const REMOVED = 2;
const COLD = 4;
const OWNED = 8;

/**
 * One version of one key. Overwriting a key makes a new Entry, so work still running for
 * the old version (a write, a load) can never resurrect it: it sees `removed`.
 *
 * A store holds an Entry for every value, spilled ones included, and every collection
 * traces them all, so every field costs on every spill of many small values: its two flags
 * share one field, and the fields only a large value,
 * a failed write or an unencodable value uses live in `RareFields`, made on first use.
 */
export class Entry {
  /** Strong reference, valid while `resident`. */
  value: unknown = undefined;
  /** Estimated in-memory bytes. */
  size: number;
  copy: StoredCopy | undefined = undefined;
  write: WriteJob | undefined = undefined;
  pins = 0;
  /** Memory LRU slot, or -1 when not linked (pinned, in flight, not resident, unspillable). */
  slot = -1;
  /** Use stamp of the memory LRU, to merge its two lists in use order; 0 from the start of a spill until a read. */
  lastUsed = 0;
  /** Slot in the LRU of the tier holding `copy`, or -1. */
  copySlot = -1;
  /** Cached resolved promise for in-memory get(): repeated gets allocate nothing. */
  resolved: Promise<unknown> | undefined = undefined;
  // TS-private, not #private: a class with #private methods gives every instance a brand slot.
  private flags = RESIDENT;
  private rare: RareFields | undefined = undefined;

  constructor(
    readonly key: string,
    value: unknown,
    size: number,
  ) {
    this.value = value;
    this.size = size;
  }

  get resident(): boolean {
    return (this.flags & RESIDENT) !== 0;
  }
  set resident(on: boolean) {
    this.flags = on ? this.flags | RESIDENT : this.flags & ~RESIDENT;
  }

  get removed(): boolean {
    return (this.flags & REMOVED) !== 0;
  }
  set removed(on: boolean) {
    this.flags = on ? this.flags | REMOVED : this.flags & ~REMOVED;
  }

  /** Set with `cold` and not used since: the memory LRU holds it as least recently used. */
  get cold(): boolean {
    return (this.flags & COLD) !== 0;
  }
  set cold(on: boolean) {
    this.flags = on ? this.flags | COLD : this.flags & ~COLD;
  }

  /**
   * Set with `owned` and not handed out since but through transient leases: the store is
   * the value's only holder, so its buffers are freed as soon as the store lets go of it.
   */
  get owned(): boolean {
    return (this.flags & OWNED) !== 0;
  }
  set owned(on: boolean) {
    this.flags = on ? this.flags | OWNED : this.flags & ~OWNED;
  }

  /**
   * Set while the value, dropped from the store, may still be alive elsewhere (it is then
   * counted as detached); also its FinalizationRegistry token.
   */
  get weak(): WeakRef<object> | undefined {
    return this.rare?.weak;
  }
  set weak(ref: WeakRef<object> | undefined) {
    if (ref !== undefined || this.rare !== undefined) this.rareFields().weak = ref;
  }

  /** The codec cannot encode it: never try again (until overwritten). */
  get unspillable(): boolean {
    return this.rare?.unspillable ?? false;
  }
  set unspillable(on: boolean) {
    if (on || this.rare !== undefined) this.rareFields().unspillable = on;
  }

  /** A write failed: do not retry before this time (ms, performance.now()). */
  get retryAfter(): number {
    return this.rare?.retryAfter ?? 0;
  }
  set retryAfter(ms: number) {
    if (ms !== 0 || this.rare !== undefined) this.rareFields().retryAfter = ms;
  }

  /** Counted as detached: dropped from the store but not yet collected. */
  get detached(): boolean {
    return this.weak !== undefined;
  }

  private rareFields(): RareFields {
    return (this.rare ??= new RareFields());
  }
}

/** The accounting buckets. Every in-memory byte of the store is in exactly one. */
export enum Bucket {
  None = 0,
  Memory = 1,
  Spilling = 2,
  Pinned = 3,
  Detached = 4,
}

export function bucketOf(entry: Entry): Bucket {
  if (entry.removed) return Bucket.None;
  if (entry.resident) {
    if (entry.pins > 0) return Bucket.Pinned;
    return entry.write !== undefined ? Bucket.Spilling : Bucket.Memory;
  }
  return entry.detached ? Bucket.Detached : Bucket.None;
}

export interface CountBytes {
  count: number;
  bytes: number;
}

/** Running totals per bucket, updated around every state change of an entry. */
export class Accounting {
  readonly counts = new Float64Array(5);
  readonly bytes = new Float64Array(5);
  /** Of the Memory bucket's bytes, those of values the codec cannot encode: no spill can free them. */
  unencodableBytes = 0;

  add(entry: Entry): void {
    const b = bucketOf(entry);
    this.counts[b]++;
    this.bytes[b] += entry.size;
    if (b === Bucket.Memory && entry.unspillable) this.unencodableBytes += entry.size;
  }

  remove(entry: Entry): void {
    const b = bucketOf(entry);
    this.counts[b]--;
    this.bytes[b] -= entry.size;
    if (b === Bucket.Memory && entry.unspillable) this.unencodableBytes -= entry.size;
  }

  get(bucket: Bucket): CountBytes {
    return { count: this.counts[bucket], bytes: this.bytes[bucket] };
  }

  /** Bytes the store holds strongly: what the target and pause thresholds apply to. */
  get residentBytes(): number {
    return this.bytes[Bucket.Memory] + this.bytes[Bucket.Spilling] + this.bytes[Bucket.Pinned];
  }
}
