import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { ThreadCollector } from '../../src/runtime/thread-collector.js';

function collector(options: { idleMs?: number; minInputBytes?: number } = {}): { c: ThreadCollector; runs: () => number } {
  let runs = 0;
  const c = new ThreadCollector({ collect: () => void runs++, idleMs: 10, minInputBytes: 10, ...options });
  return { c, runs: () => runs };
}

test('collects once the thread has been idle after a task with large inputs', async () => {
  const { c, runs } = collector();
  c.taskStarted();
  c.taskEnded(50);
  assert.equal(c.owedBytes, 50);
  // Checked at once, not after a loop turn: on a loaded host a turn can outlast the idle delay.
  assert.equal(runs(), 0, 'not at once: the thread may get another task');
  await sleep(40);
  assert.equal(runs(), 1);
  assert.equal(c.owedBytes, 0);
  await sleep(30);
  assert.equal(runs(), 1, 'once');
});

test('a task that starts cancels the idle collection; what is owed carries over', async () => {
  const { c, runs } = collector();
  c.taskEnded(50);
  c.taskStarted();
  await sleep(40);
  assert.equal(runs(), 0);
  assert.equal(c.owedBytes, 50);
  c.taskEnded(20);
  assert.equal(c.owedBytes, 70);
  await sleep(40);
  assert.equal(runs(), 1);
});

test('small leftovers add up: no collection until together they pass minInputBytes', async () => {
  const { c, runs } = collector();
  c.taskEnded(4);
  c.taskEnded(4);
  assert.equal(c.owedBytes, 8);
  await sleep(40);
  assert.equal(runs(), 0, 'not worth a collection yet');
  c.taskStarted();
  c.taskEnded(4);
  await sleep(40);
  assert.equal(runs(), 1, 'twelve bytes of garbage: collected once idle');
  assert.equal(c.owedBytes, 0);
});

test('a thread kept busy does not collect: each task cancels the collection of the one before', async () => {
  const { c, runs } = collector({ idleMs: 30 });
  for (let i = 0; i < 8; i++) {
    c.taskStarted();
    await sleep(10); // the task
    c.taskEnded(50);
  }
  assert.equal(runs(), 0);
  assert.equal(c.owedBytes, 400);
  await sleep(80);
  assert.equal(runs(), 1, 'then idle: one collection for all of them');
});
