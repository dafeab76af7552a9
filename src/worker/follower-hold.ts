import type { Lease } from '../store/lease.js';

/**
 * Keeps a fresh result in memory for a moment after a task whose result one dependent alone
 * waits for (the scheduler marks such tasks `followed`): that dependent is sent as soon as
 * the result is reported. Meanwhile, making room for another task would spill the values
 * least recently used, the fresh result first when nothing else is left, and the dependent
 * would read it back from disk: a shuffle's inputs and outputs written once more each.
 *
 * A large result keeps a thread free: starting another task beside it could take the
 * worker past its limit. A small one is pinned instead and other tasks go on: a thread kept
 * idle for a scheduler round trip after each of thousands of small results would cost more
 * than their memory. Either hold ends when its reader starts (a queued task reads the key),
 * or after `maxMs`.
 */
export interface HoldQueue<T extends { inputs: readonly string[] } = { inputs: readonly string[] }> {
  values(): Iterable<T>;
}

/** Results from this size up keep a thread free; smaller ones are pinned. */
export const HOLD_MIN_BYTES = 1 << 20;

/** Small results pinned at once, at most: the oldest pin ends first. */
export const MAX_PINS = 8;

/** Pins a result in memory; the function returned unpins it. Undefined: the result is not in memory. */
export type PinResult = (key: string) => (() => void) | undefined;

/** What pinning a result needs from the store. */
export interface PinningStore {
  where(key: string): string | undefined;
  acquire(keys: Iterable<string>, options: { transient: boolean }): Promise<Lease>;
}

/**
 * Pins results the store holds in memory with a transient lease (the value stays the
 * store's alone, so its reader may still be handed it as it is: consumed-inputs.ts).
 */
export function storePins(store: PinningStore): PinResult {
  return (key) => {
    if (store.where(key) !== 'memory') return undefined;
    let unpinned = false;
    let release: (() => void) | undefined;
    // A resident value is pinned as acquire is called; the promise only hands the lease over.
    store.acquire([key], { transient: true }).then(
      (lease) => (unpinned ? lease.release() : (release = () => lease.release())),
      () => undefined, // gone meanwhile (released, or the store closed): nothing to unpin
    );
    return () => {
      unpinned = true;
      release?.();
    };
  };
}

interface Pin {
  unpin: () => void;
  timer: NodeJS.Timeout;
}

export class FollowerHold {
  readonly #maxMs: number;
  readonly #onExpire: () => void;
  readonly #pin: PinResult | undefined;
  #key: string | undefined;
  #until = 0;
  #timer: NodeJS.Timeout | undefined;
  /** Small results pinned for their reader, oldest first. */
  readonly #pins = new Map<string, Pin>();

  constructor(maxMs: number, onExpire: () => void, pin?: PinResult) {
    this.#maxMs = maxMs;
    this.#onExpire = onExpire;
    this.#pin = pin;
  }

  /** Small results pinned now. */
  get pinned(): number {
    return this.#pins.size;
  }

  /** A task finished whose result `key` (of `bytes`) a dependent alone waits for. */
  start(key: string, bytes: number): void {
    if (this.#maxMs <= 0) return;
    if (bytes < HOLD_MIN_BYTES) return this.#pinSmall(key);
    this.#endHold();
    this.#key = key;
    this.#until = performance.now() + this.#maxMs;
    this.#timer = setTimeout(() => {
      this.#endHold();
      this.#onExpire();
    }, this.#maxMs);
    this.#timer.unref();
  }

  /** True while no other task should start: the hold runs and no queued task reads its key yet. */
  holding(queue: HoldQueue): boolean {
    return this.check(queue) === 'holding';
  }

  /**
   * `holding`: no other task should start yet; a task: the queued task that reads the key,
   * which ends the hold (that task should start first); `none`: no hold.
   */
  check<T extends { inputs: readonly string[] }>(queue: HoldQueue<T>): 'none' | 'holding' | T {
    const key = this.#key;
    if (key === undefined) return 'none';
    if (performance.now() >= this.#until) {
      this.#endHold();
      return 'none';
    }
    for (const task of queue.values()) {
      if (task.inputs.includes(key)) {
        this.#endHold();
        return task;
      }
    }
    return 'holding';
  }

  /**
   * A task starts that reads `inputs`: the pins of those it holds end, before the task takes
   * its inputs (a pinned value cannot be handed to the task as it is: consumed-inputs.ts).
   */
  reading(inputs: readonly string[]): void {
    if (this.#pins.size === 0) return;
    for (const key of inputs) this.#unpin(key);
  }

  /** Ends the hold and every pin. */
  clear(): void {
    this.#endHold();
    for (const key of [...this.#pins.keys()]) this.#unpin(key);
  }

  #endHold(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#key = undefined;
  }

  #pinSmall(key: string): void {
    if (this.#pin === undefined || this.#pins.has(key)) return;
    const unpin = this.#pin(key);
    if (unpin === undefined) return;
    if (this.#pins.size >= MAX_PINS) this.#unpin(this.#pins.keys().next().value as string);
    const timer = setTimeout(() => this.#unpin(key), this.#maxMs);
    timer.unref();
    this.#pins.set(key, { unpin, timer });
  }

  #unpin(key: string): void {
    const pin = this.#pins.get(key);
    if (pin === undefined) return;
    this.#pins.delete(key);
    clearTimeout(pin.timer);
    pin.unpin();
  }
}
