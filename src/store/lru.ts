/**
 * A doubly linked LRU list over typed arrays (as in lru-cache): links are slot numbers
 * in Int32Arrays, so touching an entry allocates nothing and the GC never walks the list.
 * Only entries that may be evicted right now are linked; pinned or in-flight ones are not.
 */
const NONE = -1;

export class LruList<T> {
  private next: Int32Array;
  private prev: Int32Array;
  private items: (T | undefined)[];
  private freeSlots: number[] = [];
  private used = 0;
  private head = NONE; // least recently used
  private tail = NONE; // most recently used
  size = 0;

  constructor(initialCapacity = 1024) {
    this.next = new Int32Array(initialCapacity);
    this.prev = new Int32Array(initialCapacity);
    this.items = new Array<T | undefined>(initialCapacity);
  }

  /** Links `item` as most recently used and returns its slot. */
  push(item: T): number {
    const slot = this.freeSlots.pop() ?? this.grow();
    this.items[slot] = item;
    this.prev[slot] = this.tail;
    this.next[slot] = NONE;
    if (this.tail !== NONE) this.next[this.tail] = slot;
    else this.head = slot;
    this.tail = slot;
    this.size++;
    return slot;
  }

  /** Links `item` as least recently used (first to go) and returns its slot. */
  unshift(item: T): number {
    const slot = this.freeSlots.pop() ?? this.grow();
    this.items[slot] = item;
    this.next[slot] = this.head;
    this.prev[slot] = NONE;
    if (this.head !== NONE) this.prev[this.head] = slot;
    else this.tail = slot;
    this.head = slot;
    this.size++;
    return slot;
  }

  /** Marks a linked slot as most recently used. */
  touch(slot: number): void {
    if (slot === this.tail) return;
    this.unlinkSlot(slot);
    this.prev[slot] = this.tail;
    this.next[slot] = NONE;
    if (this.tail !== NONE) this.next[this.tail] = slot;
    else this.head = slot;
    this.tail = slot;
  }

  /** Unlinks a slot; the slot number may be handed out again. */
  remove(slot: number): void {
    this.unlinkSlot(slot);
    this.items[slot] = undefined;
    this.freeSlots.push(slot);
    this.size--;
  }

  /** The least recently used item, if any. */
  oldest(): T | undefined {
    return this.head === NONE ? undefined : this.items[this.head];
  }

  /** Items from least to most recently used. Do not unlink while iterating. */
  *fromOldest(): Generator<T> {
    for (let slot = this.head; slot !== NONE; slot = this.next[slot]) yield this.items[slot] as T;
  }

  private unlinkSlot(slot: number): void {
    const p = this.prev[slot];
    const n = this.next[slot];
    if (p !== NONE) this.next[p] = n;
    else this.head = n;
    if (n !== NONE) this.prev[n] = p;
    else this.tail = p;
  }

  private grow(): number {
    if (this.used === this.next.length) {
      // At least 1: with `new LruList(0)` doubling would stay at 0 and writes to the
      // typed arrays would be silently dropped, corrupting the links.
      const capacity = Math.max(1, this.next.length * 2);
      const next = new Int32Array(capacity);
      next.set(this.next);
      const prev = new Int32Array(capacity);
      prev.set(this.prev);
      this.next = next;
      this.prev = prev;
      this.items.length = capacity;
    }
    return this.used++;
  }
}
