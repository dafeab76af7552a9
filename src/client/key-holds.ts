/**
 * Why a client still holds each key on the scheduler (which knows one "wanted" per client
 * and key): computations using it, a computation's `keep`, a release asked for while it
 * was in use. Futures hold keys too; the client checks those itself.
 */
export class KeyHolds {
  /** Wanted keys of the computations in progress (how many use each). */
  readonly #inUse = new Map<string, number>();
  /** Keys a computation kept (`keep: true`) and `release` has not released yet. */
  readonly #kept = new Set<string>();
  /**
   * Keys `release` was asked for while a computation still waited for them: released when the
   * last one ends. The value orders the release among compute calls (see #calls).
   */
  readonly #releaseWhenDone = new Map<string, number>();
  /** Keys an accepted submit made wanted on the scheduler and no release has released yet. */
  readonly submitted = new Set<string>();
  /** Counts compute and release calls: a release only overrides a `keep` asked for before it. */
  #calls = 0;

  /** A compute call begins: its place among compute and release calls. */
  call(): number {
    return ++this.#calls;
  }

  /** A computation uses `keys` until it ends. */
  use(keys: readonly string[]): void {
    for (const key of keys) this.#inUse.set(key, (this.#inUse.get(key) ?? 0) + 1);
  }

  /**
   * The computation asked for at `calledAt` no longer uses `keys`; with `keep`, they stay
   * held. Keys whose release was asked for meanwhile are added to `asked`.
   */
  end(keys: readonly string[], calledAt: number, keep: boolean, asked: Set<string>): void {
    for (const key of keys) {
      const n = (this.#inUse.get(key) ?? 1) - 1;
      // Released since this computation was asked for: its `keep` is overridden. A release
      // asked before it (deferred by an earlier computation) is overridden by its `keep`.
      const released = (this.#releaseWhenDone.get(key) ?? 0) > calledAt;
      if (n > 0) this.#inUse.set(key, n);
      else {
        this.#inUse.delete(key);
        if (this.#releaseWhenDone.delete(key)) asked.add(key);
      }
      if (keep && !released) this.#kept.add(key);
    }
  }

  /** The keys no computation uses and none kept. */
  unused(keys: readonly string[]): string[] {
    return keys.filter((key) => !this.#inUse.has(key) && !this.#kept.has(key));
  }

  /** `release` was asked for `keys`: they are no longer kept; those in use are released when their computations end. Returns the others. */
  release(keys: readonly string[]): string[] {
    const free: string[] = [];
    for (const key of keys) {
      this.#kept.delete(key);
      if (this.#inUse.has(key)) {
        this.#releaseWhenDone.set(key, ++this.#calls);
        continue;
      }
      free.push(key);
    }
    return free;
  }
}
