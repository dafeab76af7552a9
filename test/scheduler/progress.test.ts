import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Methods } from '../../src/cluster/protocol.js';
import { RemoteError } from '../../src/index.js';
import { FakeClient, FakeWorker, startScheduler, task } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

test("progress counts a client's tasks: done (even once released after use), erred, total", async (t) => {
  const scheduler = await startScheduler(t);
  const w = await FakeWorker.connect(t, scheduler, { auto: false });
  const client = await FakeClient.connect(t, scheduler);
  assert.deepEqual(await client.progress(), { done: 0, erred: 0, total: 0 });
  await client.submit({ a: task(), b: task('a'), c: task('b'), bad: task(), after: task('bad') }, ['c', 'after']);
  assert.deepEqual(await client.progress(), { done: 0, erred: 0, total: 5 });
  await waitFor(() => w.computes.some((c) => c.key === 'a'), 'a sent');
  w.finish('a');
  await waitFor(() => w.computes.some((c) => c.key === 'b'), 'b sent');
  w.finish('b');
  // a was released once b used it: it still counts as done.
  await waitFor(() => w.released().includes('a'), 'a released');
  assert.deepEqual(await client.progress(), { done: 2, erred: 0, total: 5 });
  w.fail('bad', 'no');
  // bad and the task waiting on it are erred.
  await waitFor(() => client.erred.has('after'), 'after erred');
  assert.deepEqual(await client.progress(), { done: 2, erred: 2, total: 5 });
  w.finish('c');
  await client.waitReady(['c']);
  assert.deepEqual(await client.progress(), { done: 3, erred: 2, total: 5 });
  // Released by the client and forgotten by the scheduler: no longer counted.
  await client.release(['c', 'after']);
  await waitFor(() => scheduler.state().tasks.total === 0, 'all forgotten');
  assert.deepEqual(await client.progress(), { done: 0, erred: 0, total: 0 });
});

test("a graph's keys the scheduler already knew (another client's) count in this client's progress", async (t) => {
  const scheduler = await startScheduler(t);
  const w = await FakeWorker.connect(t, scheduler, { auto: false });
  const first = await FakeClient.connect(t, scheduler);
  const second = await FakeClient.connect(t, scheduler);
  await first.submit({ a: task(), b: task('a') }, ['b']);
  await waitFor(() => w.computes.length === 1, 'a sent');
  w.finish('a');
  await second.submit({ a: task(), b: task('a'), c: task('b') }, ['c']);
  assert.deepEqual(await second.progress(), { done: 1, erred: 0, total: 3 });
  assert.deepEqual(await first.progress(), { done: 1, erred: 0, total: 2 });
});

test('progress is for clients: a worker asking is refused', async (t) => {
  const scheduler = await startScheduler(t);
  const w = await FakeWorker.connect(t, scheduler, { auto: false });
  await assert.rejects(w.channel.request(Methods.progress, {}), (e: unknown) => e instanceof RemoteError && e.remoteCode === 'SPW_ERR_WRONG_ROLE');
});

test("a client that never asks for progress does not make the scheduler keep every key it ever submitted", async (t) => {
  const scheduler = await startScheduler(t);
  await FakeWorker.connect(t, scheduler);
  const client = await FakeClient.connect(t, scheduler);
  for (let i = 0; i < 50; i++) {
    await client.submit({ [`a${i}`]: task(), [`b${i}`]: task(`a${i}`) }, [`b${i}`]);
    await client.waitReady([`b${i}`]);
    await client.release([`b${i}`]);
  }
  await waitFor(() => scheduler.state().tasks.total === 0, 'all forgotten');
  // The client's progress tracked 100 keys; all are forgotten, so none may be kept for it.
  assert.equal(scheduler.state().clients[0].tasks, 0);
  assert.deepEqual(await client.progress(), { done: 0, erred: 0, total: 0 });
});
