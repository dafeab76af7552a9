/** A shuffle task holds a thread slot only for its thread work: the next split runs while a transfer pushes, within a bound. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type FunctionRef, type TaskSpec } from '../../src/cluster/protocol.js';
import { SHUFFLE_MODULE, ShuffleFunctions, ShuffleMethods, type ShuffleRunInfo, type TransferMeta } from '../../src/shuffle/protocol.js';
import { SpillStore } from '../../src/store/spill-store.js';
import { DataServer } from '../../src/transfer/server.js';
import { Worker } from '../../src/worker/index.js';
import { ThreadSlots } from '../../src/worker/thread-slots.js';
import { onCleanup } from '../helpers/cleanup.js';
import { waitFor } from '../helpers/wait.js';
import { FakeScheduler } from './helpers.js';
import { ext } from '../helpers/suite.js';

test('thread slots: at most size + extra tasks, a slot each for those that take one, waiting tasks served in order', async () => {
  let changes = 0;
  const slots = new ThreadSlots(1, 1, () => changes++);
  assert.throws(() => new ThreadSlots(0, 1, () => undefined), RangeError);
  assert.throws(() => new ThreadSlots(1, -1, () => undefined), RangeError);
  const a = slots.start(true);
  assert.equal(slots.canStart(1, true), false, 'the one slot is held');
  assert.equal(slots.canStart(1, false), true, 'a task that takes its slot later may start');
  const b = slots.start(false);
  assert.equal(slots.canStart(2, false), false, 'size + extra tasks run');
  a.leave();
  assert.equal(changes, 1, 'leaving tells the pump');
  assert.equal(slots.canStart(2, true), false, 'still size + extra tasks');
  const entered: string[] = [];
  const bEnters = b.enter().then(() => entered.push('b'));
  const aEnters = a.enter().then(() => entered.push('a'));
  assert.equal(slots.waiting, 2);
  slots.serveWaiting();
  await bEnters;
  assert.deepEqual(entered, ['b'], 'first come, first served; one slot');
  b.end();
  slots.serveWaiting();
  await aEnters;
  assert.deepEqual(entered, ['b', 'a']);
  a.end();
  assert.equal(slots.held, 0);
});

test('nthreads 1: a second transfer splits while the first is still pushing; a third waits for one of them', async (t) => {
  const token = 'slots';
  // A peer that holds its answer to every push until the test lets it go.
  const peerStore = await SpillStore.open({ memoryLimit: '64 MiB', monitorIntervalMs: false });
  onCleanup(t, () => peerStore.close());
  const pushes: { input: number; answer: () => void }[] = [];
  const peer = await DataServer.listen(peerStore, {
    host: '127.0.0.1',
    token,
    onRequest: (body) =>
      new Promise<null>((resolve) => {
        pushes.push({ input: (body as { input: number }).input, answer: () => resolve(null) });
      }),
  });
  onCleanup(t, () => peer.close());
  const scheduler = await FakeScheduler.start({ token });
  onCleanup(t, () => scheduler.close());
  const worker = await Worker.start({ scheduler: scheduler.address, token, memoryLimit: '256 MiB', nthreads: 1, monitorIntervalMs: false });
  onCleanup(t, () => worker.close());
  const started: string[] = [];
  worker.on('task-started', (key: string) => started.push(key));
  const run: ShuffleRunInfo = { run: 1, workers: [peer.address], done: [] };
  scheduler.channelOf(worker.workerId).handle(ShuffleMethods.get, () => run);

  const split: FunctionRef = { module: new URL(`../shuffle/fixtures/split${ext}`, import.meta.url).href, name: 'byKey' };
  const transfer = (i: number): TaskSpec => {
    const meta: TransferMeta = { id: 'slots', partitions: 2, input: i, split, splitArgs: [] };
    const rows = Array.from({ length: 100 }, (_, n) => ({ k: n, v: `row-${i}-${n}` }));
    return { fn: { module: SHUFFLE_MODULE, name: ShuffleFunctions.transfer }, args: [rows, meta] };
  };
  for (let i = 0; i < 3; i++) scheduler.compute(worker.workerId, `transfer-${i}`, transfer(i));

  await waitFor(() => pushes.length >= 2, 'two transfers pushing');
  // The first push is not answered yet: its transfer still pushes, and the second split ran meanwhile.
  assert.deepEqual(
    pushes.map((p) => p.input),
    [0, 1],
  );
  // The pump runs as soon as a transfer gives its slot up, before it sends anything: a third
  // task allowed to start would have started by now.
  assert.deepEqual(started, ['transfer-0', 'transfer-1'], 'one task beyond the thread');
  assert.equal(scheduler.finished.length, 0);

  pushes[0].answer();
  await scheduler.finishedKey('transfer-0');
  await waitFor(() => pushes.length === 3, 'the third transfer pushing');
  assert.equal(pushes[2].input, 2);
  assert.deepEqual(started, ['transfer-0', 'transfer-1', 'transfer-2']);
  for (const push of pushes.slice(1)) push.answer();
  await scheduler.finishedKey('transfer-1');
  await scheduler.finishedKey('transfer-2');
  assert.deepEqual(scheduler.erred, []);
});
