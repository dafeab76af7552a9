/**
 * A map from ids (non-negative safe integers) to slots (non-negative int32) for the ids a
 * tier is handed, which mostly arrive in increasing runs: dense ids live in pages of an
 * Int32Array (4 bytes an id, nothing for the collector to trace), the rest in a Map. A Map
 * entry per spilled value would cost traced heap and a cache-missing insert into a table of
 * every value held, and the heap a store keeps per spilled value slows every later
 * collection.
 *
 * Which ids get pages: a page is made for an id above the newest page once that page has
 * taken an eighth of its ids (so pages cost at most 32 bytes per id taken, a Map entry's
 * price); ids that arrive sparsely or far out of order go to the Map. A page goes with its
 * last id; until then it stays, like the placement columns' pages. Every id is found
 * either way: a lookup that misses its page falls back to the Map.
 */

const PAGE_IDS = 1024;
/** A new page is made once the newest one has taken this many ids. */
const DENSE_ENOUGH = PAGE_IDS / 8;

interface Page {
  /** slot + 1 per id; 0: the id is not in this page. */
  readonly slots: Int32Array;
  count: number;
}

export class IdIndex {
  readonly #pages = new Map<number, Page>();
  readonly #sparse = new Map<number, number>();
  /** The newest page's number (-1: none yet) and how many ids it has taken since it was made. */
  #tipNo = -1;
  #tipAdded = 0;
  /** The page looked up last: runs of ids hit it over and over. */
  #lastNo = -1;
  #last: Page | undefined = undefined;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** Pages held, and ids kept in the Map (for tests and curiosity). */
  get shape(): { pages: number; sparse: number } {
    return { pages: this.#pages.size, sparse: this.#sparse.size };
  }

  /** The id's slot, or -1. */
  get(id: number): number {
    const no = Math.floor(id / PAGE_IDS);
    const page = this.#page(no);
    if (page !== undefined) {
      const v = page.slots[id - no * PAGE_IDS];
      if (v !== 0) return v - 1;
    }
    return this.#sparse.size === 0 ? -1 : (this.#sparse.get(id) ?? -1);
  }

  /** Adds an id that is not in the index (the caller checked). */
  set(id: number, slot: number): void {
    const no = Math.floor(id / PAGE_IDS);
    let page = this.#page(no);
    if (page === undefined && (this.#tipNo < 0 || no === this.#tipNo || (no > this.#tipNo && this.#tipAdded >= DENSE_ENOUGH))) {
      page = { slots: new Int32Array(PAGE_IDS), count: 0 };
      this.#pages.set(no, page);
      if (no !== this.#tipNo) this.#tipAdded = 0;
      this.#tipNo = no;
      this.#lastNo = no;
      this.#last = page;
    }
    if (page === undefined) this.#sparse.set(id, slot);
    else {
      page.slots[id - no * PAGE_IDS] = slot + 1;
      page.count++;
      if (no === this.#tipNo) this.#tipAdded++;
    }
    this.#size++;
  }

  /** Removes an id; returns its slot, or -1 if it was not there. */
  delete(id: number): number {
    const no = Math.floor(id / PAGE_IDS);
    const page = this.#page(no);
    if (page !== undefined) {
      const i = id - no * PAGE_IDS;
      const v = page.slots[i];
      if (v !== 0) {
        page.slots[i] = 0;
        this.#size--;
        if (--page.count === 0) {
          this.#pages.delete(no);
          if (this.#lastNo === no) this.#last = undefined;
        }
        return v - 1;
      }
    }
    const slot = this.#sparse.get(id);
    if (slot === undefined) return -1;
    this.#sparse.delete(id);
    this.#size--;
    return slot;
  }

  clear(): void {
    this.#pages.clear();
    this.#sparse.clear();
    this.#tipNo = this.#lastNo = -1;
    this.#tipAdded = this.#size = 0;
    this.#last = undefined;
  }

  #page(no: number): Page | undefined {
    if (no === this.#lastNo && this.#last !== undefined) return this.#last;
    const page = this.#pages.get(no);
    if (page !== undefined) {
      this.#lastNo = no;
      this.#last = page;
    }
    return page;
  }
}
