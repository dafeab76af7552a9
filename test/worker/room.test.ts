import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Room, type RoomStore, makeRoom } from '../../src/worker/room.js';
import { waitFor } from '../helpers/wait.js';

const MiB = 1024 * 1024;

/** A store whose evictions and collections lower a simulated RSS. */
function fakeStore(rss: { value: number }, freedPerRound: number, pauseBytes = 200 * MiB) {
  const calls: string[] = [];
  const store: RoomStore = {
    pauseBytes,
    memoryLimit: 1024 * MiB,
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

test('tasks admitted together each count the bytes of those admitted before them, until their thread work ends', async () => {
  const rss = { value: 150 * MiB };
  const { store, calls, readRss } = fakeStore(rss, 0);
  // Each eviction frees what it was asked for, as spilling a cold value would.
  store.evict = (bytes) => {
    calls.push(`evict ${Math.round(bytes / MiB)}`);
    rss.value -= bytes;
    return Promise.resolve(bytes);
  };
  const room = new Room(store, { readRss, settleMs: 0 });
  // Two 40 MiB tasks asked for in the same turn: 150 + 40 fits under 200, 150 + 40 + 40 does not.
  const [first, second] = await Promise.all([room.claim(40 * MiB), room.claim(40 * MiB)]);
  assert.deepEqual([first.rounds, second.rounds], [0, 1]);
  assert.deepEqual(calls, ['evict 30', 'collect']);
  assert.equal(room.heldBytes, 80 * MiB);
  // Once the first task's work has ended its memory is in RSS (or gone), no longer promised.
  first.release();
  first.release();
  assert.equal(room.heldBytes, 40 * MiB);
  rss.value += 30 * MiB; // 150 MiB: 150 + 40 held + 10 just fits
  assert.equal((await room.claim(10 * MiB)).rounds, 0);
  assert.equal(calls.length, 2);
  // 150 + 50 held + 20 is 20 over: the next task waits for a spill.
  const fourth = await room.claim(20 * MiB);
  assert.equal(fourth.rounds, 1);
  assert.deepEqual(calls.slice(2), ['evict 20', 'collect']);
  second.release();
  fourth.release();
});

test('without room a task waits for those under way to end; a task alone starts anyway', async () => {
  const rss = { value: 250 * MiB };
  const { store, calls, readRss } = fakeStore(rss, 0);
  let reads = 0;
  const room = new Room(store, { readRss: () => (reads++, readRss()), settleMs: 0, rounds: 2 });
  const first = await room.claim(32 * MiB);
  assert.equal(first.rounds, -1, 'alone, it starts over the pause level after its rounds');
  assert.equal(calls.filter((c) => c.startsWith('evict')).length, 2);
  let secondGranted = false;
  const readsBefore = reads;
  const second = room.claim(8 * MiB).then((claim) => ((secondGranted = true), claim));
  // Its rounds done (an RSS reading before each, and one after the last), it waits: not
  // a fixed time, as on a loaded host its rounds' timers can take longer than any.
  await waitFor(() => reads >= readsBefore + 3, "the second claim's rounds");
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(secondGranted, false, 'no room while the first runs: it waits');
  // The first task ends and frees its memory: room for the second.
  rss.value = 150 * MiB;
  first.release();
  assert.equal((await second).rounds, 0);
  assert.equal(room.heldBytes, 8 * MiB);
  (await second).release();
  assert.equal(room.heldBytes, 0);
  // Still no room once the first ended: the second, alone now, starts anyway.
  rss.value = 250 * MiB;
  const third = await room.claim(32 * MiB);
  const fourth = room.claim(8 * MiB);
  third.release();
  assert.equal((await fourth).rounds, -1);
  (await fourth).release();
});

test('when nothing is left to spill and no collection is allowed, a task starts at once instead of waiting out its rounds', async () => {
  const rss = { value: 250 * MiB };
  const calls: string[] = [];
  const store: RoomStore = {
    pauseBytes: 200 * MiB,
    memoryLimit: 1024 * MiB,
    evict: (bytes) => (calls.push(`evict ${Math.round(bytes / MiB)}`), Promise.resolve(0)),
    collectGarbage: () => (calls.push('collect declined'), false),
  };
  const started = performance.now();
  // A settle time long enough to see: a round that freed nothing must not wait it out.
  assert.equal(await makeRoom(store, 32 * MiB, { readRss: () => rss.value, settleMs: 2_000, rounds: 3 }), -1);
  assert.ok(performance.now() - started < 1_000, 'no settling after a round that could free nothing');
  assert.deepEqual(calls, ['evict 82', 'collect declined']);
  // Something spilled: the next round looks again (after a timer turn, without the settle: nothing was collected).
  calls.length = 0;
  store.evict = (bytes) => {
    calls.push(`evict ${Math.round(bytes / MiB)}`);
    rss.value -= 50 * MiB;
    return Promise.resolve(50 * MiB);
  };
  assert.equal(await makeRoom(store, 32 * MiB, { readRss: () => rss.value, settleMs: 2_000, rounds: 3 }), 2);
  assert.deepEqual(calls, ['evict 82', 'collect declined', 'evict 32', 'collect declined']);
});

test('a task alone without room waits while RSS falls, until its bytes fit under 0.9 of the limit', async () => {
  const rss = { value: 250 * MiB };
  let collections = 0;
  const store: RoomStore = { pauseBytes: 200 * MiB, memoryLimit: 256 * MiB, evict: () => Promise.resolve(0), collectGarbage: () => (collections++, false) };
  const room = new Room(store, { readRss: () => rss.value, settleMs: 0, ceilingWaitMs: 5_000 });
  /** Polls of the ceiling wait: each asks for a collection, as the one round of making room does once. */
  const polls = async (bytes: number): Promise<number> => {
    collections = 0;
    (await room.claim(bytes)).release();
    return collections - 1;
  };
  const elapsed = async (bytes: number): Promise<number> => {
    const started = performance.now();
    const claim = await room.claim(bytes);
    assert.equal(claim.rounds, -1);
    claim.release();
    return performance.now() - started;
  };
  // 250 + 32 is over 0.9 × 256 = 230.4 MiB. Memory the store does not hold falls 2 MiB every
  // 4 ms: the task starts once RSS reaches 198 MiB, about 100 ms later.
  const falling = setInterval(() => (rss.value -= 2 * MiB), 4);
  try {
    const waited = await elapsed(32 * MiB);
    assert.ok(rss.value + 32 * MiB <= 0.9 * 256 * MiB + 2 * MiB, `it started once there was room: RSS ${rss.value / MiB} MiB`);
    assert.ok(waited >= 60 && waited < 2_000, `it waited while RSS fell: ${waited} ms`);
  } finally {
    clearInterval(falling);
  }
  // RSS that stays put: it gives up after about 25 ms, not the whole ceiling wait.
  rss.value = 250 * MiB;
  const stalled = await elapsed(32 * MiB);
  assert.ok(stalled >= 20 && stalled < 1_000, `it gave up once RSS stopped falling: ${stalled} ms`);
  // Under the ceiling, though over the pause level, it starts at once.
  rss.value = 195 * MiB;
  assert.equal(await polls(32 * MiB), 0);
  // Over it, even a small task polls a while (RSS stays put here: until it gives up).
  rss.value = 230 * MiB;
  assert.ok((await polls(1 * MiB)) >= 3);
  // RSS falling too slowly holds a task back at most ceilingWaitMs.
  rss.value = 250 * MiB;
  const slow = new Room(store, { readRss: () => rss.value, settleMs: 0, ceilingWaitMs: 60 });
  const creeping = setInterval(() => (rss.value -= 1.5 * MiB), 10);
  try {
    const started = performance.now();
    (await slow.claim(32 * MiB)).release();
    const waited = performance.now() - started;
    assert.ok(waited >= 55 && waited < 1_000, `ceilingWaitMs bounds the wait: ${waited} ms`);
  } finally {
    clearInterval(creeping);
  }
});
