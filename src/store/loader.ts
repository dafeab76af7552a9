import { checkChecksum, ValueHasher, decodeBody, layoutOfBytes } from '../codec/index.js';
import { ChecksumError, ClosedError, KeyNotFoundError, TierReadError } from '../errors.js';
import { secondsSince } from './counters.js';
import type { Entry, StoredCopy } from './entry.js';
import type { StoreState } from './state.js';

/** A load in flight: its readers share it. */
interface Flight {
  readonly promise: Promise<unknown>;
  /** A reader that may keep the value (not a transient lease) joined it. */
  handedOut: boolean;
}

/**
 * Brings values back into memory. Single flight: all concurrent readers of a key share
 * one read and one decode, so they all get the identical object.
 *
 * A value read back for transient readers only is owned by the store, as a value set with
 * `owned` is: the read made its buffers, and those readers keep no reference, so they are
 * freed as soon as the store lets go of the value again, not left to a major collection.
 */
export class Loader {
  /** Loads in flight, by entry (a few at a time: not a field on every entry). */
  readonly #loads = new Map<Entry, Flight>();

  constructor(private readonly state: StoreState) {}

  /** `transient`: the reader keeps no reference to the value once done with it (AcquireOptions). */
  load(entry: Entry, transient = false): Promise<unknown> {
    const alive = this.state.reattach(entry);
    if (alive !== undefined) return Promise.resolve(alive);
    const running = this.#loads.get(entry);
    if (running !== undefined) {
      this.state.counters.sharedLoads++;
      if (!transient) running.handedOut = true;
      return running.promise;
    }
    const copy = entry.copy;
    if (copy === undefined) return Promise.reject(new KeyNotFoundError(entry.key));
    this.state.startReading(copy);
    const load = this.#read(entry.key, copy).then(
      (value) => {
        this.#loads.delete(entry);
        this.state.doneReading(copy);
        // Becoming resident may push memory over target and drop it again at once (when all
        // else is pinned): the readers still get this value, and a weak reference to it.
        // A reader that asked before a delete or an overwrite also gets what it asked for;
        // the value is not put back in the store then.
        // A value larger than the target goes to its reader only (StoreState.isHeavy).
        if (!entry.removed && !entry.resident) {
          if (this.state.isHeavy(entry)) this.state.keepDetached(entry, value);
          else this.state.makeResident(entry, value, !flight.handedOut);
        }
        return value;
      },
      (err: unknown) => {
        this.#loads.delete(entry);
        this.state.doneReading(copy);
        throw err;
      },
    );
    const flight: Flight = { promise: load, handedOut: !transient };
    this.#loads.set(entry, flight);
    return load;
  }

  /** Reads a copy, hashing each piece as it lands (overlapping the next read), then decodes. */
  async #read(key: string, copy: StoredCopy): Promise<unknown> {
    const { counters } = this.state;
    const tier = this.state.opts.tiers[copy.tier];
    let hasher = new ValueHasher(copy.bytes - 8);
    let hashed = 0;
    let hashSeconds = 0;
    const start = performance.now();
    let bytes: Uint8Array;
    try {
      bytes = await tier.read(copy.id, (chunk) => {
        const t = performance.now();
        hasher.update(chunk);
        hashed += chunk.byteLength;
        hashSeconds += secondsSince(t);
      });
    } catch (err) {
      // The store closed under the read (its tiers are gone): not a failure of the tier.
      if (err instanceof ClosedError || this.state.closed) throw new ClosedError();
      counters.readErrors++;
      // Reported as every counted failure is (docs/metrics.md), not only rejected to the reader.
      const failure = new TierReadError(tier.name, key, err);
      this.state.report(failure);
      throw failure;
    }
    counters.readSeconds += secondsSince(start);
    const decodeStart = performance.now();
    try {
      const layout = layoutOfBytes(bytes);
      if (hashed !== bytes.byteLength) {
        // The tier did not report its pieces: hash the whole buffer now.
        hasher = new ValueHasher(layout.trailerOffset).update(bytes);
      }
      checkChecksum(bytes, layout, hasher.digest(), `value of key ${JSON.stringify(key.slice(0, 80))} in tier "${tier.name}"`);
      const value = decodeBody(bytes, layout);
      counters.diskReads++;
      counters.unspilledBytes += bytes.byteLength;
      return value;
    } catch (err) {
      if (this.state.closed) throw new ClosedError();
      if (err instanceof ChecksumError) {
        counters.checksumErrors++;
        err.key = key; // the reader of several keys (acquire) learns which copy is bad
      } else {
        counters.readErrors++;
      }
      this.state.report(err);
      throw err;
    } finally {
      counters.decodeSeconds += hashSeconds + secondsSince(decodeStart);
    }
  }
}
