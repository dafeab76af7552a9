import { Slicer, yieldToLoop } from '../loop.js';
import { copiedBytesOf, encode, encodedPiecesSync, PackedLayout, SMALL_ENCODED_BYTES, type Encoded } from '../codec/index.js';
import { ClosedError } from '../errors.js';
import { packedWritesOf } from '../tiers/packed.js';
import type { Tier, WriteItem, WriteResults } from '../tiers/tier.js';
import { secondsSince } from './counters.js';
import { oneBatch } from '../tiers/chunks.js';
import { DEMOTE_AT } from './chain.js';
import type { Demoter } from './demoter.js';
import { type Entry, StoredCopy, type WriteJob } from './entry.js';
import type { InFlight } from './in-flight.js';
import type { SingleWrites } from './single-writes.js';
import type { SpillPlacement } from './spill-placement.js';
import type { StoreState } from './state.js';
import { turnBudget } from './turn-budget.js';
import type { SpillPump, WriteEndings } from './write-endings.js';

/**
 * The most a batch holds in a store whose producers pause soon after spilling starts: a
 * third of the bytes between `target` and `pause`. Only values above the target are being
 * written, so that window is all the store can have in flight before its producers stop;
 * batches of a third keep one batch being written while the next is encoded and a third
 * fills. With the 4 MiB cap alone, a small store would have one and a half batches in
 * flight and take turns: encode, then write, then resume. Large stores have windows of many
 * times 4 MiB and keep the cap.
 */
export function windowBatchBytes({ pauseBytes, targetBytes }: { pauseBytes: number; targetBytes: number }): number {
  return Math.max(MIN_WINDOW_BATCH_BYTES, (pauseBytes - targetBytes) / 3);
}
/** Never cut smaller for the window's sake: a store whose target is its pause level has none. */
const MIN_WINDOW_BATCH_BYTES = 1024 * 1024;

/** Values estimated at up to this many bytes are spilled in batches (when the tier takes them). */
export const BATCH_VALUE_BYTES = SMALL_ENCODED_BYTES;
/** A batch closes at this many bytes (the encoding budget of one loop turn) or this many values. */
const BATCH_BYTES = 4 * 1024 * 1024;
const BATCH_VALUES = 1024;
/**
 * Batches being filled, encoded or written at once: as many as the spiller allows single
 * small writes, so values that trickle in one per loop iteration (a batch each) are never
 * written with less concurrency than one at a time would be.
 */
const BATCHES_IN_FLIGHT = 64;
/** The loops over a batch's values give the event loop a turn after this many milliseconds. */
const SLICE_MS = 2;
/** ...looking at the clock every this many values (each takes microseconds, a clock read is not free). */
const CLOCK_EVERY = 8;
/** A tier without writeMany gets a batch as one write per value, this many at a time. */
const FALLBACK_WRITES_IN_FLIGHT = 64;

/**
 * Frames of at least this many bytes are written from the value's own memory; the rest of
 * a value (prefix, small frames, padding, trailer) is copied into the batch's side buffer.
 * Copying a frame on the loop costs time (cold memory, and page faults on a fresh batch
 * buffer), and the kernel copies it anyway; copying every frame into pooled side buffers
 * makes a spill of many small values slower, not faster.
 */
const SHARE_FROM_BYTES = 1024;

/** The spiller's parts a batch writer works with. */
export interface BatchWriterParts {
  readonly state: StoreState;
  /** Finds the tier a batch goes to (maxSpill, then room); the caller releases the reservation. */
  readonly placement: SpillPlacement;
  /** Ends each value's write with its own result. */
  readonly endings: WriteEndings;
  /** Values that go on their own after all: larger once encoded than estimated, or no room for the batch. */
  readonly singles: SingleWrites;
  /** Moves copies down once a batch has filled a tier past its mark. */
  readonly demoter: Demoter;
  /** Batches in flight, which the store's flush waits for. */
  readonly inFlight: InFlight;
  /** Told once a batch has settled: memory may be back under target, or more can be spilled. */
  readonly pump: SpillPump;
}

class Batch {
  readonly entries: Entry[] = [];
  readonly jobs: BatchJob[] = [];
  /** Estimated in-memory bytes of the entries. */
  bytes = 0;
  /** Bytes freed from memory, per entry. */
  done: Promise<number[]> = Promise.resolve([]);
}

/** The write job of one value in a batch; `done` is only made when someone asks for it. */
class BatchJob implements WriteJob {
  cancelled = false;
  /** Handed to the spiller to be written on its own. */
  alone = false;
  constructor(
    readonly id: number,
    readonly force: boolean,
    private readonly batch: Batch,
    private readonly index: number,
  ) {}
  get done(): Promise<number> {
    return this.batch.done.then((freed) => freed[this.index]);
  }
}

/**
 * Spills small values in batches: the values the pump picks in one loop iteration (at most
 * BATCH_BYTES, so the turn budget holds) are encoded together, their large frames left in
 * place and the rest laid out in one side buffer, and handed to the tier in one call: a
 * packed batch (the values' bytes back to back, see tiers/packed.ts) when the tier takes
 * one, else `writeMany`. Each value keeps its own fate: a value the tier fails, or that was deleted or
 * overwritten meanwhile, ends exactly as a single write would (kept in memory and reported,
 * or its copy orphaned); values stay readable from memory throughout.
 */
export class BatchWriter {
  readonly #enabled: boolean;
  /** A batch closes at this many bytes: small next to the first tier, so it fits where single values would. */
  readonly #closeAt: number;
  #open: Batch | undefined;
  #inFlight = 0;

  constructor(private readonly parts: BatchWriterParts) {
    const first = parts.state.opts.tiers[0];
    this.#enabled = first.writeMany !== undefined;
    this.#closeAt = Math.min(BATCH_BYTES, (first.capacity * DEMOTE_AT) / 4, windowBatchBytes(parts.state.opts));
  }

  /** True for values this writer takes: small ones, when the first tier writes batches. */
  accepts(entry: Entry): boolean {
    return this.#enabled && entry.size <= BATCH_VALUE_BYTES;
  }

  /** No new batch can start now (the open one, if any, still takes values). */
  get full(): boolean {
    return this.#open === undefined && this.#inFlight >= BATCHES_IN_FLIGHT;
  }

  /** Adds an entry to the open batch (opening one if needed) and returns its write job. */
  add(entry: Entry, id: number, force: boolean): WriteJob {
    let batch = this.#open;
    if (batch === undefined) {
      batch = this.#open = new Batch();
      this.#inFlight++;
      const done = this.#run(batch);
      batch.done = done;
      this.parts.inFlight.track(done);
    }
    const job = new BatchJob(id, force, batch, batch.entries.length);
    batch.entries.push(entry);
    batch.jobs.push(job);
    batch.bytes += entry.size;
    if (batch.bytes >= this.#closeAt || batch.entries.length >= BATCH_VALUES) this.#open = undefined;
    return job;
  }

  async #run(batch: Batch): Promise<number[]> {
    try {
      // Values picked until the end of this loop iteration join the batch, unless it fills first.
      await null;
      if (this.#open === batch) await yieldToLoop();
      if (this.#open === batch) this.#open = undefined;
      return await this.#write(batch);
    } catch (err) {
      // A bug, not a tier failure (those are per value): values still marked as being
      // written in this batch must not stay stuck, so they end as failed writes.
      const tierName = this.parts.state.opts.tiers[0].name;
      batch.entries.forEach((entry, i) => {
        if (entry.write === batch.jobs[i] && !batch.jobs[i].alone) this.parts.endings.finish(entry, batch.jobs[i], undefined, err, tierName, true);
      });
      return batch.entries.map(() => 0);
    } finally {
      this.#inFlight--;
      this.parts.state.onShrink();
      this.parts.pump.pump();
    }
  }

  async #write(batch: Batch): Promise<number[]> {
    const { state, endings, singles } = this.parts;
    const { counters } = state;
    const { entries, jobs } = batch;
    const freed = new Array<number>(entries.length).fill(0);
    const tierName = state.opts.tiers[0].name;
    const alone: Promise<void>[] = [];
    const single = (i: number, encoded: Encoded): void => {
      jobs[i].alone = true;
      alone.push(singles.run(entries[i], jobs[i], encoded).then((bytes) => void (freed[i] = bytes)));
    };
    await turnBudget.spend(Math.min(batch.bytes, BATCH_BYTES));
    // Small objects can take far longer to encode than their bytes suggest (msgpack, cold
    // code): the loop gets a turn every few milliseconds.
    const slicer = new Slicer(SLICE_MS, CLOCK_EVERY);
    // Sized for every value up front: pushing 1,024 values grew each array 9 times.
    const n = entries.length;
    const encoded: EncodedBatch = { members: new Array<number>(n), encodings: new Array<Encoded>(n), total: 0, sideBytes: 0, largest: 0 };
    let count = 0;
    for (let i = 0; i < n; i++) {
      if (slicer.due()) await slicer.turn();
      const entry = entries[i];
      if (entry.removed || jobs[i].cancelled || state.closed) {
        endings.finish(entry, jobs[i], undefined, new ClosedError(), tierName, true);
        continue;
      }
      let value: Encoded;
      try {
        value = encode(entry.value);
      } catch (err) {
        endings.finish(entry, jobs[i], undefined, err, tierName, true);
        continue;
      }
      // Larger than its size estimate said: written on its own, in slices.
      if (value.byteLength > SMALL_ENCODED_BYTES) single(i, value);
      else {
        encoded.members[count] = i;
        encoded.encodings[count++] = value;
        encoded.total += value.byteLength;
        encoded.sideBytes += copiedBytesOf(value, SHARE_FROM_BYTES);
        encoded.largest = Math.max(encoded.largest, value.byteLength);
      }
    }
    counters.encodeSeconds += slicer.busySeconds();
    encoded.members.length = encoded.encodings.length = count;
    if (count > 0) await this.#store(batch, encoded, freed, single);
    await Promise.all(alone);
    return freed;
  }

  /** Finds a tier for the batch, writes it, and ends each value's write with its own result. */
  async #store(batch: Batch, encoded: EncodedBatch, freed: number[], single: (i: number, encoded: Encoded) => void): Promise<void> {
    const { state, placement, endings, demoter } = this.parts;
    const { counters } = state;
    const { members, encodings, total } = encoded;
    let t: number;
    try {
      t = await placement.reserve(batch.entries[members[0]].key, total);
    } catch {
      // No room for the batch as a whole (maxSpill, full tiers): each value on its own, so
      // those that fit still go and the others are reported one by one.
      members.forEach((i, k) => single(i, encodings[k]));
      return;
    }
    const tier = state.opts.tiers[t];
    let results: WriteResults;
    try {
      results = await this.#send(tier, batch, encoded);
    } catch (err) {
      results = members.map(() => ({ status: 'rejected', reason: err }));
    } finally {
      state.chain.reserved[t] -= total;
    }
    const slicer = new Slicer(SLICE_MS, CLOCK_EVERY);
    for (let k = 0; k < members.length; k++) {
      if (slicer.due()) await slicer.turn();
      const i = members[k];
      // A third-party tier may answer with too few results, or none: those values failed.
      const result = Array.isArray(results) ? (results[k] as PromiseSettledResult<void> | undefined) : undefined;
      const entry = batch.entries[i];
      const job = batch.jobs[i];
      if (result?.status === 'fulfilled') {
        counters.diskWrites++;
        counters.spilledBytes += encodings[k].byteLength;
        freed[i] = endings.finish(entry, job, new StoredCopy(t, job.id, encodings[k].byteLength), undefined, tier.name, true);
      } else {
        const failure: unknown = result === undefined ? new Error(`tier "${tier.name}" gave no result for value ${job.id}`) : result.reason;
        endings.finish(entry, job, undefined, failure, tier.name, true);
      }
    }
    demoter.afterTierWrite(t);
  }

  /**
   * Lays the batch out (checksums included) and hands it to the tier: as one packed batch
   * when the tier takes it, else as `writeMany` items (or one write each).
   */
  async #send(tier: Tier, batch: Batch, { members, encodings, total, sideBytes, largest }: EncodedBatch): Promise<WriteResults> {
    const { counters } = this.parts.state;
    const slicer = new Slicer(SLICE_MS, CLOCK_EVERY);
    const packed = packedWritesOf(tier);
    let write: () => Promise<WriteResults>;
    if (packed !== undefined && total <= packed.maxBatchBytes && largest < packed.valueBytesBelow) {
      const layout = new PackedLayout(sideBytes, SHARE_FROM_BYTES);
      const ids = new Array<number>(members.length);
      const lengths = new Array<number>(members.length);
      for (let k = 0; k < members.length; k++) {
        if (slicer.due()) await slicer.turn();
        layout.add(encodings[k]);
        ids[k] = batch.jobs[members[k]].id;
        lengths[k] = encodings[k].byteLength;
      }
      write = () => packed.write({ ids, lengths, pieces: layout.pieces(), byteLength: total });
    } else {
      // One side buffer for the batch's small pieces; the large frames are views of the
      // values themselves.
      const side = new Uint8Array(sideBytes);
      const items: WriteItem[] = [];
      let offset = 0;
      for (let k = 0; k < members.length; k++) {
        if (slicer.due()) await slicer.turn();
        const pieces: Uint8Array[] = [];
        offset = encodedPiecesSync(encodings[k], side, offset, SHARE_FROM_BYTES, pieces);
        items.push({ id: batch.jobs[members[k]].id, bytes: pieces, byteLength: encodings[k].byteLength });
      }
      write = () => writeItems(tier, items);
    }
    counters.encodeSeconds += slicer.busySeconds();
    const writeStart = performance.now();
    try {
      return await write();
    } finally {
      counters.writeSeconds += secondsSince(writeStart);
    }
  }
}

/** A batch's values that go to a tier together, encoded. */
interface EncodedBatch {
  /** Their indexes in the batch. */
  readonly members: number[];
  readonly encodings: Encoded[];
  /** Sum of their encoded lengths. */
  total: number;
  /** Bytes they copy into a side buffer when laid out (`copiedBytesOf`). */
  sideBytes: number;
  /** The longest encoded length. */
  largest: number;
}

/** The tier's writeMany, or one write per value (a few dozen at a time) for a tier without it. */
async function writeItems(tier: Tier, items: readonly WriteItem[]): Promise<WriteResults> {
  if (tier.writeMany !== undefined) return tier.writeMany(items);
  const results: WriteResults = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const k = next++;
      const { id, bytes, byteLength } = items[k];
      results[k] = await tier.write(id, oneBatch(bytes), byteLength).then(
        () => ({ status: 'fulfilled', value: undefined }),
        (reason: unknown) => ({ status: 'rejected', reason }),
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(FALLBACK_WRITES_IN_FLIGHT, items.length) }, worker));
  return results;
}
