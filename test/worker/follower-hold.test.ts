import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FollowerHold, HOLD_MIN_BYTES, MAX_PINS, storePins } from '../../src/worker/follower-hold.js';
import { ref } from '../../src/cluster/protocol.js';
import { Worker } from '../../src/worker/index.js';
import { MiB, openStore } from '../helpers/store.js';
import { FakeScheduler, fn } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

const queue = (...inputs: string[][]): { values(): Iterable<{ inputs: string[] }> } => ({ values: () => inputs.map((i) => ({ inputs: i })) });

test('a hold lasts until a queued task reads the result', () => {
  const hold = new FollowerHold(60_000, () => assert.fail('no expiry'));
  hold.start('out-1', HOLD_MIN_BYTES);
  assert.equal(hold.holding(queue()), true);
  assert.equal(hold.holding(queue(['other'])), true);
  assert.equal(hold.holding(queue(['other'], ['x', 'out-1'])), false);
  assert.equal(hold.holding(queue()), false, 'ended for good');
});

test('check says when the reader has arrived, once', () => {
  const hold = new FollowerHold(60_000, () => assert.fail('no expiry'));
  assert.equal(hold.check(queue(['out-1'])), 'none');
  hold.start('out-1', HOLD_MIN_BYTES);
  assert.equal(hold.check(queue(['other'])), 'holding');
  assert.deepEqual(hold.check(queue(['x'], ['out-1'])), { inputs: ['out-1'] });
  assert.equal(hold.check(queue(['out-1'])), 'none');
});

test('a hold ends by itself after its limit, and asks for a pump', async () => {
  let expired = 0;
  const hold = new FollowerHold(20, () => expired++);
  hold.start('out-1', HOLD_MIN_BYTES);
  assert.equal(hold.holding(queue()), true);
  await waitFor(() => expired === 1, 'expiry');
  assert.equal(hold.holding(queue()), false);
});

test('small results and a closed hold hold nothing', () => {
  const hold = new FollowerHold(60_000, () => assert.fail('no expiry'));
  hold.start('small', HOLD_MIN_BYTES - 1);
  assert.equal(hold.holding(queue()), false);
  hold.start('big', HOLD_MIN_BYTES);
  hold.clear();
  assert.equal(hold.holding(queue()), false);
});

/** A pin function that records which keys are pinned now. */
function fakePins(): { pinned: Set<string>; pin: (key: string) => () => void } {
  const pinned = new Set<string>();
  return {
    pinned,
    pin: (key) => {
      pinned.add(key);
      return () => pinned.delete(key);
    },
  };
}

test('a small result is pinned, not held: other tasks may start, and its reader unpins it', () => {
  const pins = fakePins();
  const hold = new FollowerHold(60_000, () => assert.fail('no expiry'), pins.pin);
  hold.start('small', HOLD_MIN_BYTES - 1);
  assert.equal(hold.holding(queue()), false, 'no thread kept free');
  assert.deepEqual([...pins.pinned], ['small']);
  hold.reading(['other']);
  assert.deepEqual([...pins.pinned], ['small']);
  hold.reading(['x', 'small']);
  assert.deepEqual([...pins.pinned], []);
  assert.equal(hold.pinned, 0);
});

test('a pin ends by itself after the limit', async () => {
  const pins = fakePins();
  const hold = new FollowerHold(20, () => undefined, pins.pin);
  hold.start('small', 1000);
  assert.equal(pins.pinned.size, 1);
  await waitFor(() => pins.pinned.size === 0, 'pin expiry');
  assert.equal(hold.pinned, 0);
});

test(`at most ${MAX_PINS} pins: the oldest ends first`, () => {
  const pins = fakePins();
  const hold = new FollowerHold(60_000, () => undefined, pins.pin);
  for (let i = 0; i <= MAX_PINS; i++) hold.start(`r${i}`, 1000);
  assert.equal(hold.pinned, MAX_PINS);
  assert.equal(pins.pinned.has('r0'), false);
  assert.equal(pins.pinned.has(`r${MAX_PINS}`), true);
  hold.clear();
});

test('a large hold ending leaves the pins; clear ends both', () => {
  const pins = fakePins();
  const hold = new FollowerHold(60_000, () => undefined, pins.pin);
  hold.start('small', 1000);
  hold.start('big', HOLD_MIN_BYTES);
  assert.deepEqual(hold.check(queue(['big'])), { inputs: ['big'] });
  assert.deepEqual([...pins.pinned], ['small'], 'the large hold ended, the pin did not');
  hold.start('big2', HOLD_MIN_BYTES);
  hold.clear();
  assert.equal(hold.holding(queue()), false);
  assert.equal(pins.pinned.size, 0);
});

test('storePins keeps a value in memory through eviction, and it stays the store\'s alone', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 64 * MiB });
  const value = new Float64Array(16 * 1024);
  store.set('r', value, { owned: true });
  store.set('other', new Float64Array(16 * 1024), { owned: true });
  const unpin = storePins(store)('r');
  assert.ok(unpin !== undefined);
  await store.evict();
  assert.equal(store.where('r'), 'memory', 'pinned: not spilled');
  assert.notEqual(store.where('other'), 'memory', 'the rest was spilled');
  unpin();
  assert.equal(await store.consume('r', () => true), value, 'unpinned and still owned: its reader may take it whole');
  store.set('s', new Float64Array(16), { owned: true });
  await store.evict();
  assert.equal(storePins(store)('s'), undefined, 'not in memory: nothing to pin');
});

test('a worker keeps a small followed result in memory for its reader, which takes it whole', async (t) => {
  const scheduler = await FakeScheduler.start();
  const worker = await Worker.start({ scheduler: scheduler.address, memoryLimit: '256 MiB', nthreads: 1, monitorIntervalMs: false });
  t.after(async () => {
    await worker.close();
    await scheduler.close();
  });
  const id = worker.workerId;
  const length = 16 * 1024; // 128 KiB: under HOLD_MIN_BYTES
  scheduler.compute(id, 'x', fn('make', 5, length), { followed: true });
  scheduler.compute(id, 'y', fn('make', 6, length));
  await scheduler.finishedKey('x');
  await scheduler.finishedKey('y');
  // What making room for another task does: spill everything it can.
  await worker.store.evict();
  assert.equal(worker.store.where('x'), 'memory', 'pinned for its reader');
  assert.notEqual(worker.store.where('y'), 'memory', 'not followed: spilled');
  scheduler.compute(id, 'sx', fn('sum', ref('x')), { consumes: ['x'] });
  await scheduler.finishedKey('sx');
  assert.equal(await worker.store.get('sx'), 5 * length);
  assert.equal(worker.store.has('x'), false, 'unpinned as its reader started: taken whole, not copied');
});
