import { Slicer } from '../../loop.js';
import { ClosedError, InvalidArgumentError, TierDuplicateIdError, TierNotOpenError, TierWriteCancelledError, type SpillwayError } from '../../errors.js';
import { lengthError, oneBatch, packSmall, type CompressionMode, type Packed, type StoredChunk } from '../chunks.js';
import { compressedOnly, type DiskCatalog } from './catalog.js';
import type { HeldIds } from './held-ids.js';
import type { SegmentStore } from './segment-store.js';
import { TierCounters } from '../stats.js';
import type { Tier, WriteItem, WriteResults } from '../tier.js';
import type { PackedBatch } from '../packed.js';
import { checkId, checkNonNegativeInteger } from '../validate.js';

/** One frozen result for every value written: a batch of 1024 values allocates none. */
const FULFILLED: PromiseSettledResult<void> = Object.freeze({ status: 'fulfilled', value: undefined });
const fulfilled = (): PromiseSettledResult<void> => FULFILLED;
const rejected = (reason: unknown): PromiseSettledResult<void> => ({ status: 'rejected', reason });
/** Compressing a batch gives the loop a turn every SLICE_MS, reading the clock every CLOCK_EVERY values. */
const SLICE_MS = 2;
const CLOCK_EVERY = 8;

/** The DiskTier settings its batches follow. */
export interface BatchSettings {
  readonly smallValueBytes: number;
  readonly compression: CompressionMode;
  readonly chunkBytes: number;
  /** The largest packed batch: one segment. */
  readonly segmentBytes: number;
}

/**
 * A DiskTier's batches: writeMany and the store's packed batches, small values fused into
 * segments together. It keeps the calls in flight (a delete of a value they are writing,
 * and close, wait for them) and the ids deleted meanwhile, which a batch removes again and
 * fails.
 */
export class BatchWrites {
  /** writeMany calls in flight. */
  readonly #inFlight = new Set<Promise<void>>();
  /** Ids deleted while a call in flight was writing them. */
  readonly #cancelled = new Set<number>();
  #closed = false;
  /** Made once, when the tier closes: a batch in flight then fails every value with it. */
  #closedError: ClosedError | undefined;

  constructor(
    /** Large items of a writeMany are written as the tier's `write` would. */
    private readonly tier: Pick<Tier, 'name' | 'write'>,
    private readonly settings: BatchSettings,
    private readonly catalog: DiskCatalog,
    private readonly counters: TierCounters,
    private readonly held: HeldIds,
  ) {}

  /** writeMany, tracked so that delete() and close() can wait for it. */
  writeMany(items: readonly WriteItem[], segments: SegmentStore | undefined): Promise<WriteResults> {
    if (this.#closed) return Promise.reject(new ClosedError(`tier "${this.tier.name}"`));
    if (segments === undefined) return Promise.reject(new TierNotOpenError(this.tier.name));
    return this.#track(this.#writeFused(items, segments));
  }

  /** A packed batch, tracked as writeMany is. */
  writePacked(batch: PackedBatch, segments: SegmentStore | undefined): Promise<WriteResults> {
    if (this.#closed) return Promise.reject(new ClosedError(`tier "${this.tier.name}"`));
    if (segments === undefined) return Promise.reject(new TierNotOpenError(this.tier.name));
    return this.#track(this.#writePacked(batch, segments));
  }

  /** A delete of a value a call in flight is writing: that call removes what it wrote and fails the value. */
  async cancel(id: number): Promise<void> {
    this.#cancelled.add(id);
    await Promise.all([...this.#inFlight]);
    this.#cancelled.delete(id);
  }

  /** Every value of the calls still in flight fails with ClosedError; resolves once they have ended. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#inFlight]);
    this.#cancelled.clear();
  }

  #track(run: Promise<WriteResults>): Promise<WriteResults> {
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.#inFlight.add(settled);
    void settled.then(() => this.#inFlight.delete(settled));
    return run;
  }

  /** Why a value this batch has written must not be kept (the tier closed, a delete cancelled it), if so. */
  #abandoned(id: number): SpillwayError | undefined {
    if (this.#closed) return (this.#closedError ??= new ClosedError(`tier "${this.tier.name}"`));
    if (this.#cancelled.size > 0 && this.#cancelled.delete(id)) return new TierWriteCancelledError(this.tier.name, id);
    return undefined;
  }

  /**
   * writeMany: small items are validated and packed one by one (a bad item fails alone),
   * then appended together; large items are written as `write` would, concurrently. The
   * fused items are kept in parallel arrays and their places in `Placements`, not an object
   * each: this is the per-value path of spilling many small values.
   */
  async #writeFused(items: readonly WriteItem[], segments: SegmentStore): Promise<WriteResults> {
    const { catalog, counters, settings } = this;
    const { fused } = catalog;
    const elapsed = TierCounters.timer();
    const results: WriteResults = new Array(items.length);
    const files: Promise<void>[] = [];
    // Per fused item: its index in `items`, its id, its slot in `fused`, its pieces.
    const indexes: number[] = [];
    const ids: number[] = [];
    const slots: number[] = [];
    const pieces: (readonly Uint8Array[])[] = [];
    // Every item is registered before the first await, so a delete that follows this call
    // finds it `Writing` and cancels it, as with `write`.
    for (let i = 0; i < items.length; i++) {
      const { id, bytes, byteLength } = items[i];
      if (byteLength >= settings.smallValueBytes) {
        files.push(this.tier.write(id, oneBatch(bytes), byteLength).then(fulfilled, rejected).then((r) => void (results[i] = r)));
        continue;
      }
      try {
        checkId(id, byteLength);
        if (this.held.taken(id)) throw new TierDuplicateIdError(this.tier.name, id);
        let total = 0;
        for (const piece of bytes) total += piece.byteLength;
        if (total !== byteLength) throw lengthError(total, byteLength);
        slots.push(fused.add(id, byteLength));
        indexes.push(i);
        ids.push(id);
        pieces.push(bytes);
      } catch (err) {
        counters.recordFailedWrite(0);
        results[i] = rejected(err);
      }
    }
    const tables = settings.compression === 'none' ? undefined : await this.#pack(items, indexes, ids, slots, pieces, results);
    let failures: unknown[];
    try {
      failures = await segments.putMany(ids, slots, pieces);
    } catch (err) {
      failures = ids.map(() => err);
    }
    const share = ids.length > 0 ? elapsed() / ids.length : 0;
    for (let k = 0; k < ids.length; k++) {
      results[indexes[k]] = this.#endFused(segments, ids[k], slots[k], items[indexes[k]].byteLength, failures[k], share, tables?.[k]);
    }
    await Promise.all(files);
    return results;
  }

  /**
   * Compresses a batch's fused items in place (stored lengths and pieces replaced by their
   * packed form); an item that fails to pack fails alone and leaves the arrays. Returns
   * each remaining item's chunk table.
   */
  async #pack(
    items: readonly WriteItem[],
    indexes: number[],
    ids: number[],
    slots: number[],
    pieces: (readonly Uint8Array[])[],
    results: WriteResults,
  ): Promise<StoredChunk[][]> {
    const { fused } = this.catalog;
    const tables: StoredChunk[][] = [];
    // Small chunks compress synchronously, so a batch compresses in slices with loop turns
    // between: in one step a large batch would hold the loop for tens of milliseconds.
    const slicer = new Slicer(SLICE_MS, CLOCK_EVERY);
    let kept = 0;
    for (let k = 0; k < ids.length; k++) {
      const i = indexes[k];
      try {
        if (slicer.due()) await slicer.turn();
        const packed: Packed = await packSmall(pieces[k], items[i].byteLength, this.settings.compression, this.settings.chunkBytes);
        fused.setStored(slots[k], packed.stored);
        indexes[kept] = i;
        ids[kept] = ids[k];
        slots[kept] = slots[k];
        pieces[kept] = packed.pieces;
        tables[kept] = packed.table;
        kept++;
      } catch (err) {
        fused.delete(ids[k]);
        this.counters.recordFailedWrite(0);
        results[i] = rejected(err);
      }
    }
    indexes.length = ids.length = slots.length = pieces.length = kept;
    return tables;
  }

  /**
   * A packed batch (see packed.ts): one pass over its numbers registers every value (a bad
   * one fails alone, its bytes left as dead space), then the whole batch is one run of one
   * segment, one reservation and one queued append. Only for a tier without compression.
   */
  async #writePacked(batch: PackedBatch, segments: SegmentStore): Promise<WriteResults> {
    const { catalog, counters, settings } = this;
    const { fused } = catalog;
    const { ids, lengths, pieces, byteLength } = batch;
    checkPackedShape(batch, settings.segmentBytes);
    const elapsed = TierCounters.timer();
    const results: WriteResults = new Array(ids.length);
    // Per value: its slot in `fused`, or -1 once it has failed.
    const slots: number[] = new Array(ids.length);
    // Every value is registered before the first await, so a delete that follows this call
    // finds it `Writing` and cancels it, as with `write`.
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      const length = lengths[i];
      try {
        checkNonNegativeInteger('id', id);
        if (length >= settings.smallValueBytes) throw new InvalidArgumentError(`value ${id} has ${length} bytes: a packed batch holds values under ${settings.smallValueBytes}`);
        if (this.held.taken(id)) throw new TierDuplicateIdError(this.tier.name, id);
        slots[i] = fused.add(id, length);
      } catch (err) {
        slots[i] = -1;
        counters.recordFailedWrite(0);
        results[i] = rejected(err);
      }
    }
    let failure: unknown;
    try {
      await segments.putPacked(ids, slots, lengths, pieces, byteLength);
    } catch (err) {
      failure = err;
    }
    const share = ids.length > 0 ? elapsed() / ids.length : 0;
    for (let i = 0; i < ids.length; i++) {
      if (slots[i] >= 0) results[i] = this.#endFused(segments, ids[i], slots[i], lengths[i], failure, share, undefined);
    }
    return results;
  }

  /**
   * Ends a fused value's write in a batch: visible once its bytes are placed (unless the tier
   * closed or a delete cancelled it meanwhile, which unplaces it), else forgotten. `share` is
   * its part of the batch's seconds; `table`, its compressed chunks if any.
   */
    #endFused(
    segments: SegmentStore,
    id: number,
    slot: number,
    size: number,
    failure: unknown,
    share: number,
    table: StoredChunk[] | undefined,
  ): PromiseSettledResult<void> {
    const { catalog, counters } = this;
    let reason = failure;
    if (reason === undefined) {
      reason = this.#abandoned(id);
      if (reason !== undefined) segments.remove(id);
    }
    if (reason !== undefined) {
      catalog.fused.delete(id);
      counters.recordFailedWrite(share);
      return rejected(reason);
    }
    catalog.addFused(id, slot, size, table === undefined ? undefined : compressedOnly(table));
    if (table !== undefined) counters.recordChunks(table);
    counters.recordWrite(share, size, catalog.fused.stored(slot));
    return FULFILLED;
  }

}

/** What must hold for a packed batch as a whole (else nothing of it is stored). */
function checkPackedShape({ ids, lengths, pieces, byteLength }: PackedBatch, maxBatchBytes: number): void {
  if (lengths.length !== ids.length) throw new InvalidArgumentError(`a packed batch has ${ids.length} ids and ${lengths.length} lengths`);
  checkNonNegativeInteger('byteLength', byteLength);
  if (byteLength > maxBatchBytes) throw new InvalidArgumentError(`a packed batch holds at most ${maxBatchBytes} bytes, got ${byteLength}`);
  let sum = 0;
  for (const length of lengths) {
    checkNonNegativeInteger('length', length);
    sum += length;
  }
  if (sum !== byteLength) throw new InvalidArgumentError(`a packed batch's lengths add up to ${sum} bytes, not its byteLength ${byteLength}`);
  let held = 0;
  for (const piece of pieces) held += piece.byteLength;
  if (held !== byteLength) throw lengthError(held, byteLength);
}
