/**
 * How the receiver's chunks reach the store. While the store has room a chunk is laid out
 * in a pooled buffer and `set` like any value (the unpack later takes it out and lends its
 * buffer on: chunk-loans.ts). Once the store is at its target, a chunk set would only be
 * spilled at once, and its buffer left to the collector: instead it is written through
 * (`putEncoded`: straight to the disk tier, small chunks fused as spilled values are),
 * gathered from the pieces where they arrived (`writeGathered`), so that no copy is made on
 * the loop and no buffer is needed for it (the receiver lays small pieces out first, and
 * gives their buffer back once written). A chunk set is `owned`: the store holds it
 * alone, and frees its buffer as soon as it spills it. A write that fails leaves the chunk
 * to the store as an ordinary value, which spills it or holds it: no piece is ever lost.
 */
import { gatheredBatches, gatheredByteLength } from '../codec/index.js';
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

  /** Whether a chunk of `bytes` stored now would be written through rather than set. */
  writesThrough(bytes: number): boolean {
    // The store's own level only: a process over target for other memory (threads' results)
    // may still keep chunks until their unpack.
    return this.#store.residentBytes + bytes > this.#store.targetBytes;
  }

  /** Sets a chunk from `laidOut` (not touched afterwards) in the store. */
  set(key: string, chunk: Uint8Array): void {
    // Cold: spilling writes the pieces, read only once every input is split, before the values in use.
    // Owned: the store holds the chunk alone, so one it spills is freed at once.
    this.#store.set(key, chunk, { cold: true, size: chunk.byteLength, owned: true });
  }

  /**
   * Writes through the chunk that `views` make laid end to end (`bytes` in all) from where
   * they are, without laying them out in a buffer: for when the store is at its target
   * (`writesThrough`), where a chunk set would only be spilled at once. `done` is called
   * once, when nothing here reads the views any more: the write finished, or failed and the
   * chunk was set as a copy, or the key was dropped meanwhile.
   */
  writeGathered(key: string, views: readonly Uint8Array[], bytes: number, done: () => void): void {
    const store = this.#store;
    this.#bytes += bytes;
    const writing: Writing = {
      dropped: false,
      done: store.putEncoded(key, gatheredBatches(views), gatheredByteLength(bytes)).then(done, () => {
        try {
          // The store holds it as an ordinary value instead, which it spills or keeps: no piece is lost.
          if (!writing.dropped && !store.closed) this.set(key, this.laidOut(views, bytes));
        } finally {
          done();
        }
      }),
    };
    void writing.done.finally(() => {
      this.#writing.delete(key);
      this.#bytes -= bytes;
      const settled = this.#settled;
      this.#settled = undefined;
      settled?.();
    });
    this.#writing.set(key, writing);
  }

  /** `views` laid end to end in a buffer of the pool (the one copy of a chunk kept in memory). */
  laidOut(views: readonly Uint8Array[], bytes: number): Uint8Array {
    const chunk = this.#pool.take(bytes);
    let at = 0;
    for (const view of views) {
      chunk.set(view, at);
      at += view.byteLength;
    }
    return chunk;
  }

  /** A buffer from `laidOut` that nothing reads any more goes back to the pool. */
  giveBack(chunk: Uint8Array): void {
    this.#pool.give(chunk.buffer as ArrayBuffer);
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
