import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeRoom, type RoomStore } from '../../src/worker/room.js';

const MiB = 1024 * 1024;

/** A store whose evictions and collections lower a simulated RSS. */
function fakeStore(rss: { value: number }, freedPerRound: number, pauseBytes = 200 * MiB) {
  const calls: string[] = [];
  const store: RoomStore = {
    pauseBytes,
    evict: (bytes: number) => {
      calls.push(`evict ${Math.round(bytes / MiB)}`);
      return Promise.resolve(0);
    },
    // Any argument shows up in the record: an unrationed collection must not be asked for.
    collectGarbage: (...args: unknown[]) => {
      calls.push(['collect', ...args].join(' '));
      rss.value -= freedPerRound;
      return true;
    },
  };
  return { store, calls, readRss: () => rss.value };
}

test('with room to spare a task starts at once, without spilling or collecting', async () => {
  const rss = { value: 100 * MiB };
  const { store, calls, readRss } = fakeStore(rss, 0);
  assert.equal(await makeRoom(store, 32 * MiB, { readRss, settleMs: 0 }), 0);
  assert.deepEqual(calls, []);
});

test('over the pause level it spills what is over, collects within the ration, and starts once there is room', async () => {
  const rss = { value: 190 * MiB };
  const { store, calls, readRss } = fakeStore(rss, 15 * MiB);
  // 190 + 32 = 222 MiB: 22 over; one round frees 15, the second brings it under.
  assert.equal(await makeRoom(store, 32 * MiB, { readRss, settleMs: 0 }), 2);
  assert.deepEqual(calls, ['evict 22', 'collect', 'evict 7', 'collect']);
});

test('memory that cannot be freed holds a task back a few rounds, not forever', async () => {
  const rss = { value: 250 * MiB };
  const { store, calls, readRss } = fakeStore(rss, 0);
  assert.equal(await makeRoom(store, 32 * MiB, { readRss, settleMs: 0, rounds: 3 }), -1);
  assert.equal(calls.filter((c) => c.startsWith('evict')).length, 3);
});

test('a task with no binary bytes, or a store without a pause level, never waits', async () => {
  const rss = { value: 500 * MiB };
  const { store, calls, readRss } = fakeStore(rss, 0);
  assert.equal(await makeRoom(store, 0, { readRss, settleMs: 0 }), 0);
  const noPause = fakeStore(rss, 0, Infinity);
  assert.equal(await makeRoom(noPause.store, 64 * MiB, { readRss, settleMs: 0 }), 0);
  assert.deepEqual([...calls, ...noPause.calls], []);
});

test('the collection waits for a timer turn after the eviction: timers due meanwhile run between', async () => {
  const rss = { value: 190 * MiB };
  const { store, calls, readRss } = fakeStore(rss, 40 * MiB);
  const evict = store.evict;
  // A timer that falls due while the eviction runs (a heartbeat, the loop-delay monitor).
  store.evict = (bytes) => {
    setTimeout(() => calls.push('timer'), 0);
    return evict(bytes);
  };
  assert.equal(await makeRoom(store, 32 * MiB, { readRss, settleMs: 0 }), 1);
  assert.deepEqual(calls, ['evict 22', 'timer', 'collect']);
});
