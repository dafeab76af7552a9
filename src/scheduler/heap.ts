/** A binary min-heap of (priority, key) pairs: the ready queues of the placement. */
export interface HeapEntry {
  priority: number;
  key: string;
}

export class MinHeap {
  readonly #items: HeapEntry[] = [];

  get size(): number {
    return this.#items.length;
  }

  push(entry: HeapEntry): void {
    const items = this.#items;
    items.push(entry);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (items[parent].priority <= entry.priority) break;
      items[i] = items[parent];
      i = parent;
    }
    items[i] = entry;
  }

  peek(): HeapEntry | undefined {
    return this.#items[0];
  }

  pop(): HeapEntry | undefined {
    const items = this.#items;
    const top = items[0];
    const last = items.pop();
    if (top === undefined || last === undefined || items.length === 0) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child = right < items.length && items[right].priority < items[left].priority ? right : left;
      if (items[child].priority >= last.priority) break;
      items[i] = items[child];
      i = child;
    }
    items[i] = last;
    return top;
  }

  /** Every entry, in no particular order (to move a whole queue elsewhere). */
  drain(): HeapEntry[] {
    return this.#items.splice(0, this.#items.length);
  }
}
