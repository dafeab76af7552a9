import { setTimeout as sleep } from 'node:timers/promises';

/** What making room needs from the store. */
export interface RoomStore {
  readonly pauseBytes: number;
  evict(bytes: number): Promise<number>;
  /** Collects if the store's ration allows (never unrationed: see makeRoom). */
  collectGarbage(): boolean;
}

export interface RoomOptions {
  /** Rounds of spilling and collecting before the task starts anyway. Default 3. */
  rounds?: number;
  /** Pause after a round, for writes to land and the collector's sweeper to free memory. Default 20 ms. */
  settleMs?: number;
  /** Reads process RSS (tests replace it). */
  readRss?: () => number;
}

/**
 * Makes room for a task before it starts on a thread.
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
 * for it forever would stall the worker. Resolves to the rounds it took (0: there was
 * room), or -1 when it gave up and the task starts anyway.
 */
export async function makeRoom(store: RoomStore, bytes: number, options: RoomOptions = {}): Promise<number> {
  const rounds = options.rounds ?? 3;
  const settleMs = options.settleMs ?? 20;
  const readRss = options.readRss ?? (() => process.memoryUsage.rss());
  if (!Number.isFinite(store.pauseBytes) || bytes <= 0) return 0;
  for (let round = 0; ; round++) {
    const over = readRss() + bytes - store.pauseBytes;
    if (over <= 0) return round;
    if (round === rounds) return -1;
    await store.evict(over);
    // Never in the same loop turn as the eviction's end: a pause of the store's own (a
    // rationed collection) or V8's may have just ended in that turn, and two pauses in one
    // block make the worst event-loop delays. A timer turn lets heartbeats, peers and
    // timers run in between.
    await sleep(1);
    store.collectGarbage();
    await sleep(settleMs);
  }
}
