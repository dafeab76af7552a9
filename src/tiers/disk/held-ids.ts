import type { WriteTracker } from '../validate.js';
import type { DiskCatalog } from './catalog.js';

/** Which ids a DiskTier holds or is writing: every way an id gets in asks here first. */
export class HeldIds {
  /** The highest id asked about: no id above it can be held or being written. */
  #highestAsked = -1;

  constructor(
    private readonly catalog: DiskCatalog,
    private readonly writes: WriteTracker,
  ) {}

  /** The id is stored, or being written. */
  taken(id: number): boolean {
    // Every way an id gets in (write, writeMany, a packed batch) asks here first, so an id
    // above every id asked about cannot be in: the store's ids only grow, and each new one
    // skips two lookups in tables of every value held.
    if (id > this.#highestAsked) {
      this.#highestAsked = id;
      return false;
    }
    return this.catalog.has(id) || this.writes.has(id);
  }
}
