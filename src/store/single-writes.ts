import { encode, encodedBatchesSync, encodedBytesSync, SMALL_ENCODED_BYTES, type Encoded } from '../codec/index.js';
import { ClosedError } from '../errors.js';
import { oneBatch } from '../tiers/chunks.js';
import type { WriteSource } from '../tiers/tier.js';
import { secondsSince } from './counters.js';
import { timed } from './encoded-io.js';
import { type Entry, StoredCopy, type WriteJob } from './entry.js';
import { Slots } from './slots.js';
import type { SpillPlacement } from './spill-placement.js';
import type { StoreState } from './state.js';
import { turnBudget } from './turn-budget.js';
import type { WriteEndings } from './write-endings.js';

/** Values under this many bytes count as small (the DiskTier default for fused segments). */
const SMALL_VALUE_BYTES = 1024 * 1024;
const SMALL_WRITES_IN_FLIGHT = 64;

/** Writes values one at a time, each to the tier its placement finds, in write slots. */
export class SingleWrites {
  /** Large values: `spillConcurrency` writes at a time. */
  readonly #large: Slots;
  /**
   * Small values get many slots of their own: a tier can then batch them (DiskTier fuses
   * writes that arrive together into one writev), and a 4 KiB write never waits behind a
   * 1 GiB one.
   */
  readonly #small = new Slots(SMALL_WRITES_IN_FLIGHT);

  constructor(
    private readonly state: StoreState,
    private readonly placement: SpillPlacement,
    private readonly endings: WriteEndings,
  ) {
    this.#large = new Slots(state.opts.spillConcurrency);
  }

  /** No write of this entry can start now: its slots are all taken. */
  full(entry: Entry): boolean {
    return this.#slotsFor(entry).full;
  }

  /** Writes one value on its own once a slot is free (`encoded` when a batch already encoded it); resolves to the bytes freed. */
  run(entry: Entry, job: WriteJob, encoded?: Encoded): Promise<number> {
    return this.#slotsFor(entry).run(() => this.#write(entry, job, encoded));
  }

  #slotsFor(entry: Entry): Slots {
    return entry.size < SMALL_VALUE_BYTES ? this.#small : this.#large;
  }

  async #write(entry: Entry, job: WriteJob, encoded?: Encoded): Promise<number> {
    const { state } = this;
    const { counters } = state;
    let failure: unknown;
    let copy: StoredCopy | undefined;
    let tierName = state.opts.tiers[0].name;
    try {
      if (encoded === undefined) {
        if (entry.removed || job.cancelled || state.closed) throw new ClosedError();
        await turnBudget.spend(Math.min(entry.size, SMALL_ENCODED_BYTES));
        if (entry.removed || job.cancelled || state.closed) throw new ClosedError();
        // Timed from here: the wait for a turn is queueing, not encoding.
        const encodeStart = performance.now();
        encoded = encode(entry.value);
        counters.encodeSeconds += secondsSince(encodeStart);
      } else if (entry.removed || job.cancelled || state.closed) throw new ClosedError();
      const t = await this.placement.reserve(entry.key, encoded.byteLength);
      const tier = state.opts.tiers[t];
      tierName = tier.name;
      const writeStart = performance.now();
      try {
        await tier.write(job.id, this.#source(encoded), encoded.byteLength);
      } finally {
        state.chain.reserved[t] -= encoded.byteLength;
      }
      counters.writeSeconds += secondsSince(writeStart);
      counters.diskWrites++;
      counters.spilledBytes += encoded.byteLength;
      copy = new StoredCopy(t, job.id, encoded.byteLength);
    } catch (err) {
      failure = err;
    }
    return this.endings.finish(entry, job, copy, failure, tierName, false);
  }

  /**
   * The bytes of an encoded value for a tier: small ones as one buffer laid out at once
   * (per-value overhead dominates there), large ones as batches hashed while written.
   */
  #source(encoded: Encoded): WriteSource {
    const { counters } = this.state;
    if (encoded.byteLength > SMALL_ENCODED_BYTES) return timed(encodedBatchesSync(encoded), (s) => (counters.encodeSeconds += s));
    const start = performance.now();
    const bytes = encodedBytesSync(encoded);
    counters.encodeSeconds += secondsSince(start);
    return oneBatch([bytes]);
  }
}
