/**
 * Inputs a task reads last (the scheduler's `consumes`), handed to its thread as they are:
 * a thread otherwise gets a copy of each large input (copy-inputs.ts), made on the loop
 * into fresh memory while the thread waits, and the store keeps its own copy until the
 * scheduler releases the key a moment later. A value the store holds alone, in memory, is
 * taken out of the store instead and its buffer lent to the thread: no copy, no second
 * allocation, and the memory is freed when the task ends. Values of other shapes, spilled
 * ones and those handed out elsewhere are copied as before.
 *
 * A task that fails hands its inputs back and they return to the store, so nothing the
 * scheduler still counts on is lost. A thread that dies takes them along; the scheduler
 * releases such a key anyway, as the task that read it last has ended. A shuffle's transfer
 * keeps its input for another split (a new run) and frees it when it ends
 * (shuffle/worker-service.ts).
 */
import type { SpillStore } from '../store/spill-store.js';
import { isMarkedAsUntransferable } from '../runtime/buffer-release.js';
import { MOVE_MIN_BYTES, viewOver } from './copy-inputs.js';

type TypedArray = Exclude<ArrayBufferView, DataView>;

/**
 * A typed array over the whole of an ArrayBuffer, large enough to move, and one that can be
 * rebuilt from its buffer alone (Node's Buffer cannot: its constructor is not a typed
 * array's). Its buffer can be lent and the value made again from what comes back.
 */
export function lendableWhole(value: unknown): value is TypedArray {
  if (!ArrayBuffer.isView(value) || value instanceof DataView || Buffer.isBuffer(value)) return false;
  const buffer = value.buffer;
  return buffer instanceof ArrayBuffer && value.byteOffset === 0 && value.byteLength === buffer.byteLength && value.byteLength >= MOVE_MIN_BYTES && isMarkedAsUntransferable?.(buffer) !== true;
}

/** `like`'s type over `buffer` (the same memory, handed back by a thread). */
export function rebuilt(like: TypedArray, buffer: ArrayBuffer): TypedArray {
  // A lendable value is a typed array (not a Buffer), so its type is kept as it is.
  return viewOver(like, buffer) as TypedArray;
}

/** Inputs taken out of the store for one task, by key, in the order their buffers are lent. */
export class ConsumedInputs {
  readonly keys: string[] = [];
  readonly values: TypedArray[] = [];

  has(key: string): boolean {
    return this.keys.includes(key);
  }

  get(key: string): TypedArray | undefined {
    const at = this.keys.indexOf(key);
    return at < 0 ? undefined : this.values[at];
  }

  get buffers(): ArrayBuffer[] {
    return this.values.map((v) => v.buffer as ArrayBuffer);
  }

  /**
   * Takes `keys` (those the task reads last) out of `store` where the store holds them alone
   * in memory as lendable values; a buffer two keys share is taken once.
   */
  static async take(store: SpillStore, keys: readonly string[]): Promise<ConsumedInputs> {
    const out = new ConsumedInputs();
    for (const key of keys) {
      const value = await store.consume(key, (v) => lendableWhole(v) && !out.values.some((o) => o.buffer === v.buffer));
      if (value !== undefined) {
        out.keys.push(key);
        out.values.push(value as TypedArray);
      }
    }
    return out;
  }

  /**
   * The task has ended, and `lent` / `lentAt` are what its thread handed back of `buffers`.
   * `keep`: put those values back in the store (the task did not finish: its inputs are
   * still the worker's), else they are freed. A value whose buffer did not come back is gone
   * (the thread died, or the result holds it and took it along).
   */
  settle(store: SpillStore, lent: readonly ArrayBuffer[] | undefined, lentAt: readonly number[] | undefined, keep: boolean): ArrayBuffer[] {
    const free: ArrayBuffer[] = [];
    (lent ?? []).forEach((buffer, i) => {
      const at = lentAt?.[i];
      if (at === undefined || at >= this.keys.length) return;
      if (keep) putBack(store, this.keys[at], rebuilt(this.values[at], buffer));
      else free.push(buffer);
    });
    return free;
  }

  /** Puts every value back in the store as it is (the task never reached its thread). */
  restore(store: SpillStore): void {
    this.keys.forEach((key, i) => putBack(store, key, this.values[i]));
    this.keys.length = 0;
    this.values.length = 0;
  }
}

/** A taken value returned to the store, which holds it alone again. */
function putBack(store: SpillStore, key: string, value: TypedArray): void {
  store.set(key, value, { owned: true, size: value.byteLength });
}
