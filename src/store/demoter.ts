import { TierWriteError } from '../errors.js';
import { streamSource } from './encoded-io.js';
import { DEMOTE_AT } from './chain.js';
import { type Entry, StoredCopy } from './entry.js';
import type { InFlight } from './in-flight.js';
import type { StoreState } from './state.js';

/**
 * Moves copies down the chain: when a tier passes DEMOTE_AT of its capacity, its least
 * recently used copies are streamed, tier to tier, to the next tier with room. One mover
 * per tier at a time, counted in flight so that the store's flush waits for it.
 */
export class Demoter {
  readonly #running = new Map<number, Promise<void>>();
  /** Entries whose copy is being moved down (a few at a time: not a field on every entry). */
  readonly #moving = new Set<Entry>();

  constructor(
    private readonly state: StoreState,
    private readonly inFlight: InFlight,
  ) {}

  /** After a write to tier `t`: start moving its coldest copies down if it is over the mark. */
  afterTierWrite(t: number): void {
    if (this.state.chain.overfull(t) && !this.#running.has(t)) {
      this.inFlight.track(this.demote(t, 0).catch((err: unknown) => this.state.report(err)));
    }
  }

  /**
   * Moves the coldest copies of tier `t` to the next tier with room, one at a time, until
   * `incoming` more bytes fit under its demotion mark. A second caller waits for the
   * running mover.
   */
  demote(t: number, incoming: number): Promise<void> {
    const running = this.#running.get(t);
    if (running !== undefined) return running;
    const done = this.#demoteNow(t, incoming).finally(() => this.#running.delete(t));
    this.#running.set(t, done);
    return done;
  }

  async #demoteNow(t: number, incoming: number): Promise<void> {
    const { state } = this;
    const { chain } = state;
    const tier = chain.tiers[t];
    while (chain.fill(t, incoming) > tier.capacity * DEMOTE_AT && !state.closed) {
      let victim: Entry | undefined;
      for (const entry of chain.lrus[t].fromOldest()) {
        if (!this.#moving.has(entry) && entry.copy !== undefined && entry.copy.readers === 0) {
          victim = entry;
          break;
        }
      }
      if (victim === undefined || !(await this.#move(victim, t))) return;
    }
  }

  async #move(entry: Entry, t: number): Promise<boolean> {
    const { state } = this;
    const old = entry.copy as StoredCopy;
    const target = state.chain.pick(old.bytes, t + 1);
    if (target < 0) return false;
    const tier = state.opts.tiers[target];
    const id = state.newId();
    this.#moving.add(entry);
    state.startReading(old);
    state.chain.reserved[target] += old.bytes;
    try {
      await tier.write(id, streamSource(state.opts.tiers[t].createReadStream(old.id)), old.bytes);
    } catch (err) {
      state.report(new TierWriteError(tier.name, entry.key, err));
      return false;
    } finally {
      state.chain.reserved[target] -= old.bytes;
      state.doneReading(old);
      this.#moving.delete(entry);
    }
    const moved = new StoredCopy(target, id, old.bytes);
    state.chain.demotions[t]++;
    if (entry.removed || entry.copy !== old) {
      state.orphan(moved);
      return true;
    }
    state.setCopy(entry, moved);
    state.orphan(old);
    this.afterTierWrite(target);
    return true;
  }
}
