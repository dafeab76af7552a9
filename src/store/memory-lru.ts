import type { Entry } from './entry.js';
import { LruList } from './lru.js';

/**
 * The LRU of evictable in-memory values, kept as two lists: values that must be written
 * before they can go ("dirty") and values that already have a copy below ("clean", free to
 * drop). Each list is in use order; a use counter stamped on touch lets the two be merged
 * into one LRU order. Finding a clean value to drop is O(1) instead of a scan past every
 * dirty one, which made spilling 100 000 small values quadratic.
 */
export class MemoryLru {
  readonly #dirty = new LruList<Entry>();
  readonly #clean = new LruList<Entry>();
  #clock = 0;
  /** Stamps of cold values count down from 0: below every use, the latest cold value lowest. */
  #coldClock = 0;

  get size(): number {
    return this.#dirty.size + this.#clean.size;
  }

  /** Links an entry as most recently used, or as least recently used when it is `cold` (until it is used). */
  link(entry: Entry): void {
    if (entry.cold) {
      entry.lastUsed = --this.#coldClock;
      entry.slot = this.#list(entry).unshift(entry);
      return;
    }
    entry.lastUsed = ++this.#clock;
    entry.slot = this.#list(entry).push(entry);
  }

  unlink(entry: Entry): void {
    if (entry.slot < 0) return;
    this.#list(entry).remove(entry.slot);
    entry.slot = -1;
  }

  /** Marks a use. An unlinked entry is stamped too: its spill then sees it was used while written. */
  touch(entry: Entry): void {
    entry.cold = false;
    entry.lastUsed = ++this.#clock;
    if (entry.slot < 0) return;
    this.#list(entry).touch(entry.slot);
  }

  /** The least recently used value overall. */
  oldest(): Entry | undefined {
    const dirty = this.#dirty.oldest();
    const clean = this.#clean.oldest();
    if (dirty === undefined) return clean;
    if (clean === undefined) return dirty;
    return clean.lastUsed < dirty.lastUsed ? clean : dirty;
  }

  /** The least recently used value that has a copy below. */
  oldestClean(): Entry | undefined {
    return this.#clean.oldest();
  }

  /** All linked values, least recently used first. Do not unlink while iterating. */
  *fromOldest(): Generator<Entry> {
    const dirty = this.#dirty.fromOldest();
    const clean = this.#clean.fromOldest();
    let d = dirty.next();
    let c = clean.next();
    while (d.done !== true || c.done !== true) {
      if (c.done === true || (d.done !== true && d.value.lastUsed < c.value.lastUsed)) {
        yield d.value as Entry;
        d = dirty.next();
      } else {
        yield c.value;
        c = clean.next();
      }
    }
  }

  /** Which list holds the entry: its copy only appears or moves while it is unlinked. */
  #list(entry: Entry): LruList<Entry> {
    return entry.copy === undefined ? this.#dirty : this.#clean;
  }
}
