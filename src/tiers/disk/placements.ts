import { IdIndex } from './id-index.js';

/**
 * Where a DiskTier's fused values live, by id, with no object per value: an index from id
 * to a slot (id-index.ts: pages of an Int32Array for runs of ids, a Map for the rest), and
 * per slot a segment number, an offset, a stored length and a state, in typed-array
 * columns (the layout of lru-cache's index lists). A record object and a Map entry
 * pointing at it per spilled small value would be heap the garbage collector traces and
 * copies; a slot costs 21 bytes of typed arrays it never looks into, plus 4 in the id
 * index.
 *
 * Columns grow by pages, never by copying, so a tier with millions of values never
 * stalls the loop on a resize. Freed slots are reused first (a free slot's segment column
 * links to the next free one, so the free list costs nothing); the pages are kept at
 * their high-water mark until the tier empties, when they are all let go.
 */

const PAGE_BITS = 14;
const PAGE_SLOTS = 1 << PAGE_BITS;
const PAGE_MASK = PAGE_SLOTS - 1;

/** The segment column of a slot whose value has no place (yet, or any more). */
export const NO_SEGMENT = -1;

export enum SlotState {
  Free = 0,
  /** Registered by a write in flight: not readable, not counted, but its id is taken. */
  Writing = 1,
  /** Written and visible. */
  Live = 2,
}

export class Placements {
  readonly #slots = new IdIndex();
  readonly #segment: Int32Array[] = [];
  readonly #offset: Float64Array[] = [];
  readonly #stored: Float64Array[] = [];
  readonly #state: Uint8Array[] = [];
  /** Head of the free list, or -1. */
  #free = -1;
  #used = 0;

  /** Ids registered (writing or live). */
  get size(): number {
    return this.#slots.size;
  }

  /** One past the highest slot in use since the tier was last empty (slots are below it). */
  get slotCount(): number {
    return this.#used;
  }

  has(id: number): boolean {
    return this.slotOf(id) >= 0;
  }

  /** The id's slot, or -1. */
  slotOf(id: number): number {
    return this.#slots.get(id);
  }

  /** Registers an id as being written, with no place yet; the caller checked it is new. */
  add(id: number, stored: number): number {
    let slot = this.#free;
    if (slot >= 0) this.#free = this.#segment[slot >>> PAGE_BITS][slot & PAGE_MASK];
    else slot = this.#grow();
    const page = slot >>> PAGE_BITS;
    const i = slot & PAGE_MASK;
    this.#segment[page][i] = NO_SEGMENT;
    this.#offset[page][i] = 0;
    this.#stored[page][i] = stored;
    this.#state[page][i] = SlotState.Writing;
    this.#slots.set(id, slot);
    return slot;
  }

  /** Forgets an id; its slot is reused. */
  delete(id: number): void {
    const slot = this.#slots.delete(id);
    if (slot < 0) return;
    if (this.#slots.size === 0) {
      this.clear();
      return;
    }
    const page = slot >>> PAGE_BITS;
    const i = slot & PAGE_MASK;
    this.#state[page][i] = SlotState.Free;
    this.#segment[page][i] = this.#free;
    this.#free = slot;
  }

  clear(): void {
    this.#slots.clear();
    this.#segment.length = this.#offset.length = this.#stored.length = this.#state.length = 0;
    this.#free = -1;
    this.#used = 0;
  }

  segment(slot: number): number {
    return this.#segment[slot >>> PAGE_BITS][slot & PAGE_MASK];
  }

  offset(slot: number): number {
    return this.#offset[slot >>> PAGE_BITS][slot & PAGE_MASK];
  }

  stored(slot: number): number {
    return this.#stored[slot >>> PAGE_BITS][slot & PAGE_MASK];
  }

  state(slot: number): SlotState {
    return this.#state[slot >>> PAGE_BITS][slot & PAGE_MASK] as SlotState;
  }

  setStored(slot: number, stored: number): void {
    this.#stored[slot >>> PAGE_BITS][slot & PAGE_MASK] = stored;
  }

  setLive(slot: number): void {
    this.#state[slot >>> PAGE_BITS][slot & PAGE_MASK] = SlotState.Live;
  }

  place(slot: number, segment: number, offset: number): void {
    const page = slot >>> PAGE_BITS;
    const i = slot & PAGE_MASK;
    this.#segment[page][i] = segment;
    this.#offset[page][i] = offset;
  }

  unplace(slot: number): void {
    this.#segment[slot >>> PAGE_BITS][slot & PAGE_MASK] = NO_SEGMENT;
  }

  #grow(): number {
    const slot = this.#used++;
    if ((slot & PAGE_MASK) === 0) {
      this.#segment.push(new Int32Array(PAGE_SLOTS));
      this.#offset.push(new Float64Array(PAGE_SLOTS));
      this.#stored.push(new Float64Array(PAGE_SLOTS));
      this.#state.push(new Uint8Array(PAGE_SLOTS));
    }
    return slot;
  }
}
