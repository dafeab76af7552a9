import { setTimeout as sleep } from 'node:timers/promises';

/** What making room needs from the store. */
export interface RoomStore {
  readonly pauseBytes: number;
  readonly memoryLimit: number;
  evict(bytes: number): Promise<number>;
  /** Collects if the store's ration allows (never unrationed: see makeRoom). */
  collectGarbage(): boolean;
}

export interface RoomOptions {
  /** Rounds of spilling and collecting before the task starts anyway. Default 3. */
  rounds?: number;
  /** Pause after a round that collected, for the collector's sweeper to free memory. Default 20 ms. */
  settleMs?: number;
  /** Reads process RSS (tests replace it). */
  readRss?: () => number;
  /** Longest a task that found no room waits for RSS to fall under the ceiling before it starts anyway. Default 250 ms. */
  ceilingWaitMs?: number;
}

/**
 * The fraction of the memory limit a task starting without room must fit under: spilling
 * could not bring RSS under the pause level, but memory the store does not hold still
 * comes and goes (pieces being written, frames being acknowledged, garbage V8 collects).
 */
const CEILING = 0.9;
/** How long RSS may stay put before a task waiting for the ceiling starts anyway, and the fall that counts. */
const STALLED_MS = 25;
const FALL_BYTES = 1024 * 1024;

/** Room made for one task's thread work; released once that work has ended. */
export interface RoomClaim {
  /** Rounds of spilling it took (after waiting for other tasks, if it had to): 0 when there was room, -1 when the task started anyway. */
  readonly rounds: number;
  /** The task's memory is now in RSS (or gone): later claims stop counting it. Idempotent. */
  release(): void;
}

/**
 * Makes room for tasks before they start on a thread.
 *
 * Why: a task's transient memory (the thread's copy of its inputs, then its output) lands
 * on top of whatever the process holds, and the store's monitor samples RSS only now and
 * then; admitted on an old sample, a task's memory can arrive over a worker already near
 * its pause level. So the worker reads RSS now and, while RSS plus the task's bytes
 * would pass the pause level, spills least recently used values and collects what was let
 * go of (a dropped value's memory returns only when V8 collects). The collection keeps to
 * the store's ration (runtime/release-collector.ts): a forced collection stops the loop
 * for several times as long as one of V8's own incremental cycles, which on a busy worker
 * come every few hundred milliseconds anyway and free the same values; a task started
 * before one of them lands peaks a little higher, still under the pause level's margin.
 * A few rounds at most: memory that spilling cannot free is not the store's, and waiting
 * for it forever would stall the worker.
 *
 * With several task threads, tasks are admitted one at a time, and each counts the bytes
 * of the tasks admitted before it whose thread work has not ended: two tasks checked
 * against the same reading would each find room that only one of them has. Those bytes
 * are counted whole although some may show in RSS already: RSS cannot tell a task's
 * memory arriving from other memory coming and going (spills, collections, peers'
 * pieces), and counting too much costs an early spill where counting too little costs a
 * worker over its limit. When spilling cannot make room, a task waits for one under way to
 * end rather than start over the limit: under memory pressure the worker runs fewer tasks
 * at once, down to one, which starts anyway.
 */
export class Room {
  readonly #store: RoomStore;
  readonly #options: RoomOptions;
  readonly #readRss: () => number;
  /** Bytes of the claims granted and not released. */
  #heldBytes = 0;
  /** Admissions that found no room, waiting for the next release. */
  #waiters: (() => void)[] = [];
  /** Admissions run one after another: the tail of that line. */
  #line: Promise<unknown> = Promise.resolve();

  constructor(store: RoomStore, options: RoomOptions = {}) {
    this.#store = store;
    this.#options = options;
    this.#readRss = options.readRss ?? (() => process.memoryUsage.rss());
  }

  /** Bytes of the claims granted whose thread work has not ended. */
  get heldBytes(): number {
    return this.#heldBytes;
  }

  /** Waits for room for `bytes` more, after the claims ahead of it; release the claim once the task's thread work ends. */
  claim(bytes: number): Promise<RoomClaim> {
    const turn = this.#line.then(() => this.#admit(bytes));
    this.#line = turn.catch(() => undefined);
    return turn;
  }

  async #admit(bytes: number): Promise<RoomClaim> {
    if (bytes <= 0 || !Number.isFinite(this.#store.pauseBytes)) return { rounds: 0, release: () => undefined };
    const options = { ...this.#options, readRss: this.#readRss, heldBytes: () => this.#heldBytes };
    let rounds = await makeRoom(this.#store, bytes, options);
    // No room, and tasks under way will end and free theirs: wait for one rather than start
    // over the limit. Only a task alone starts anyway.
    while (rounds < 0 && this.#heldBytes > 0) {
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
      rounds = await makeRoom(this.#store, bytes, options);
    }
    if (rounds < 0) await this.#underCeiling(bytes);
    this.#heldBytes += bytes;
    let held = true;
    return {
      rounds,
      release: () => {
        if (!held) return;
        held = false;
        this.#heldBytes -= bytes;
        for (const resolve of this.#waiters.splice(0)) resolve();
      },
    };
  }

  /**
   * A task alone and without room still waits, briefly, for its bytes to fit under the
   * limit's ceiling, but only while RSS keeps falling: with thousands of small tasks and
   * RSS held up by memory that does not go away, a fixed wait each would add up to minutes.
   */
  async #underCeiling(bytes: number): Promise<void> {
    const ceiling = this.#store.memoryLimit * CEILING;
    const started = performance.now();
    const deadline = started + (this.#options.ceilingWaitMs ?? 250);
    let lowest = this.#readRss();
    let fellAt = started;
    for (;;) {
      const rss = this.#readRss();
      if (rss + bytes <= ceiling) return;
      const now = performance.now();
      if (rss <= lowest - FALL_BYTES) {
        lowest = rss;
        fellAt = now;
      }
      // RSS that has stopped falling will not make room by waiting longer.
      if (now >= deadline || now - fellAt >= STALLED_MS) return;
      this.#store.collectGarbage();
      await sleep(5);
    }
  }
}

/**
 * One admission (see Room): resolves to the rounds it took (0: there was room), or -1 when
 * it gave up and the task starts anyway. `heldBytes`: memory already promised to tasks
 * under way.
 */
export async function makeRoom(store: RoomStore, bytes: number, options: RoomOptions & { heldBytes?: () => number } = {}): Promise<number> {
  const rounds = options.rounds ?? 3;
  const settleMs = options.settleMs ?? 20;
  const readRss = options.readRss ?? (() => process.memoryUsage.rss());
  if (!Number.isFinite(store.pauseBytes) || bytes <= 0) return 0;
  for (let round = 0; ; round++) {
    const over = readRss() + (options.heldBytes?.() ?? 0) + bytes - store.pauseBytes;
    if (over <= 0) return round;
    if (round === rounds) return -1;
    const evicted = await store.evict(over);
    // Never in the same loop turn as the eviction's end: a pause of the store's own (a
    // rationed collection) or V8's may have just ended in that turn, and two pauses in one
    // block make the worst event-loop delays. A timer turn lets heartbeats, peers and
    // timers run in between.
    await sleep(1);
    const collected = store.collectGarbage();
    // Nothing left to spill and no collection allowed: the memory over is not the store's,
    // and waiting would only keep the thread idle.
    if (evicted === 0 && !collected) return -1;
    // The collector's sweeper frees on its threads after the pause: a moment for it.
    if (collected) await sleep(settleMs);
  }
}
