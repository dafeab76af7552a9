import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from '../../src/worker/index.js';
import { FakeScheduler, fn } from './helpers.js';

test('a thread that dies between tasks (an error thrown from a timer) does not crash the worker', async (t) => {
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown): void => void uncaught.push(err);
  process.on('uncaughtException', onUncaught);
  t.after(() => process.off('uncaughtException', onUncaught));
  const scheduler = await FakeScheduler.start();
  t.after(() => scheduler.close());
  const worker = await Worker.start({ scheduler: scheduler.address, memoryLimit: '64 MiB', nthreads: 1, monitorIntervalMs: false });
  t.after(() => worker.close());
  const threadErrors: unknown[] = [];
  worker.on('thread-error', (err) => threadErrors.push(err));
  const id = worker.workerId;
  scheduler.compute(id, 'first', fn('throwLater', 20));
  await scheduler.finishedKey('first');
  // The thread dies ~20 ms after the task returned (later on a loaded host).
  for (const start = Date.now(); threadErrors.length === 0 && Date.now() - start < 10_000; ) await sleep(20);
  assert.deepEqual(uncaught.map(String), [], 'the pool\'s "error" event had no listener: it was thrown on the main thread');
  assert.match(String(threadErrors[0]), /thrown after the task returned/);
  scheduler.compute(id, 'second', fn('add', 1, 2));
  await scheduler.finishedKey('second');
  assert.equal(worker.closed, false);
});
