/**
 * How the receiver's chunks reach the store. A chunk is laid out in a pooled buffer. While
 * the store has room it is `set` like any value (the unpack later takes it out and lends
 * its buffer on: chunk-loans.ts). Once the store is at its target, a chunk set would only
 * be spilled at once, and its buffer left to the collector: instead it is written through
 * (`putEncoded`: straight to the disk tier, small chunks fused as spilled values are) and
 * its buffer goes back to the pool as soon as the write has finished with it. A chunk set is
 * `owned`: the store holds it alone, and frees its buffer as soon as it spills it. A write that
 * fails leaves the chunk to the store as an ordinary value, which spills it or holds it:
 * no piece is ever lost.
 */
import { encode, encodedBatches } from '../codec/index.js';
import type { SizedBufferPool } from '../runtime/sized-buffer-pool.js';
import type { SpillStore } from '../store/spill-store.js';

interface Writing {
  readonly done: Promise<void>;
  /** The key was dropped meanwhile (its run forgotten): a failed write is not set instead. */
  dropped: boolean;
}

export class ChunkWrites {
  readonly #store: SpillStore;
  readonly #pool: SizedBufferPool;
  readonly #writing = new Map<string, Writing>();
  #bytes = 0;
  #settled: (() => void) | undefined;

  constructor(store: SpillStore, pool: SizedBufferPool) {
    this.#store = store;
    this.#pool = pool;
  }

  /** Bytes of chunks being written through. */
  get bytes(): number {
    return this.#bytes;
  }

  /** A buffer for a chunk of `bytes`. */
  buffer(bytes: number): Uint8Array {
    return this.#pool.take(bytes);
  }

  /** Stores a chunk laid out in a `buffer()` (and not touched afterwards): set, or written through once the store is at its target. */
  store(key: string, chunk: Uint8Array): void {
    const store = this.#store;
    // The store's own level only: a process over target for other memory (threads' results) may still keep chunks until their unpack.
    if (store.residentBytes + chunk.byteLength <= store.targetBytes) {
      // Cold: spilling writes the pieces, read only once every input is split, before the values in use.
      // Owned: the store holds the chunk alone, so one it spills is freed at once.
      store.set(key, chunk, { cold: true, size: chunk.byteLength, owned: true });
      return;
    }
    const encoded = encode(chunk);
    this.#bytes += chunk.byteLength;
    const writing: Writing = {
      dropped: false,
      done: store.putEncoded(key, encodedBatches(encoded), encoded.byteLength).then(
        // Written: nothing reads the buffer any more. Only the pool's own go back (never a push's memory).
        () => void (this.#pool.made(chunk.buffer) && this.#pool.give(chunk.buffer)),
        () => {
          // The store holds it as a value now (spilled later, or in memory): never given back from here.
          if (!writing.dropped && !store.closed) store.set(key, chunk, { cold: true, size: chunk.byteLength, owned: true });
        },
      ),
    };
    void writing.done.finally(() => {
      this.#writing.delete(key);
      this.#bytes -= chunk.byteLength;
      const settled = this.#settled;
      this.#settled = undefined;
      settled?.();
    });
    this.#writing.set(key, writing);
  }

  /** Resolves once the chunks under `keys` are in the store (written through, or set after a failed write). */
  async written(keys: readonly string[]): Promise<void> {
    await Promise.all(keys.map((key) => this.#writing.get(key)?.done));
  }

  /** Resolves when a write through finishes (at once when none is running). */
  async someWritten(): Promise<void> {
    if (this.#writing.size === 0) return;
    await new Promise<void>((resolve) => {
      const before = this.#settled;
      this.#settled = () => {
        before?.();
        resolve();
      };
    });
  }

  /** The key is deleted: a write of it still running is not replaced by a set if it fails. */
  dropped(key: string): void {
    const writing = this.#writing.get(key);
    if (writing !== undefined) writing.dropped = true;
  }
}
