import type { StoredCopy } from './entry.js';

/** One putEncoded call of a key. */
interface PutToken {
  /** The call it superseded, if that one was still writing then. */
  readonly prev: PutToken | undefined;
  /** Neither failed nor settled: it may still take the key. */
  live: boolean;
  /** Resolves once it has failed, landed or been discarded. */
  readonly settled: Promise<void>;
}

/**
 * The latest putEncoded call of each key still writing. A set, delete or later putEncoded
 * of the key replaces or removes its token: the earlier write then lands nowhere (its copy
 * is deleted), as if it had taken effect when it was called. A later putEncoded that fails
 * changed nothing: it hands the key back to the earlier call.
 */
export class EncodedPuts {
  readonly #latest = new Map<string, PutToken>();

  /** A set or delete of `key` wins over the putEncoded calls still writing it. */
  supersede(key: string): void {
    if (this.#latest.size > 0) this.#latest.delete(key);
  }

  /**
   * Runs one putEncoded's write. Resolves with the copy written and whether the key is still
   * this call's (false: a later set, delete or putEncoded won, and the copy must go); rejects
   * as the write does, the key then handed back to the latest earlier call still live.
   */
  async write(key: string, write: () => Promise<StoredCopy>): Promise<{ copy: StoredCopy; latest: boolean }> {
    const puts = this.#latest;
    let settle!: () => void;
    const token: PutToken = { prev: puts.get(key), live: true, settled: new Promise<void>((resolve) => (settle = resolve)) };
    puts.set(key, token);
    try {
      let copy: StoredCopy;
      try {
        copy = await write();
      } catch (err) {
        // Failed: nothing changed. The latest earlier call still live takes the key back.
        token.live = false;
        if (puts.get(key) === token) {
          let back = token.prev;
          while (back !== undefined && !back.live) back = back.prev;
          if (back === undefined) puts.delete(key);
          else puts.set(key, back);
        }
        throw err;
      }
      // A later putEncoded still writing may yet fail and hand the key back: wait for it.
      for (let current = puts.get(key); current !== undefined && current !== token; current = puts.get(key)) await current.settled;
      const latest = puts.get(key) === token;
      token.live = false;
      if (latest) puts.delete(key);
      return { copy, latest };
    } finally {
      settle();
    }
  }
}
