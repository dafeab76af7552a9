import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClient, FakeWorker, sleep, startScheduler, task } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

test('intermediate keys are released once consumed; wanted keys stay until the client releases them', async (t) => {
  const scheduler = await startScheduler(t);
  const w = await FakeWorker.connect(t, scheduler);
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ a: task(), b: task('a'), c: task('b') }, ['c']);
  await client.waitReady(['c']);
  await waitFor(() => w.released().length === 2, 'a and b released');
  assert.deepEqual(w.released(), ['a', 'b']);
  assert.deepEqual([...w.store], ['c']);
  assert.deepEqual(client.ready.get('c')?.holders, [w.data]);
  assert.equal(client.ready.get('c')?.size, 100);
  await client.release(['c']);
  await waitFor(() => w.released().includes('c'), 'c released');
  assert.equal(scheduler.state().tasks.total, 0);
});

test('a key with two dependents is released only after both ran', async (t) => {
  const scheduler = await startScheduler(t);
  const w = await FakeWorker.connect(t, scheduler, { auto: false });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ a: task(), b1: task('a'), b2: task('a') }, ['b1', 'b2']);
  await waitFor(() => w.computes.length === 1, 'a sent');
  w.finish('a');
  await waitFor(() => w.computes.length === 3, 'b1 and b2 sent');
  w.finish('b1');
  await client.waitReady(['b1']);
  await sleep(20);
  assert.deepEqual(w.released(), []);
  w.finish('b2');
  await waitFor(() => w.released().includes('a'), 'a released');
  assert.deepEqual(w.releases, [['a']]);
});

test('a client that disconnects releases its keys and cancels the work nobody else needs', async (t) => {
  const scheduler = await startScheduler(t);
  const w = await FakeWorker.connect(t, scheduler, { auto: false });
  const leaving = await FakeClient.connect(t, scheduler);
  const staying = await FakeClient.connect(t, scheduler);
  await staying.submit({ shared: task() }, ['shared']);
  await leaving.submit({ shared: task(), x: task(), y: task('x'), z: task('y', 'shared'), solo: task() }, ['z', 'shared', 'solo']);
  await waitFor(() => w.computes.length === 3, 'shared, x, solo sent');
  w.finish('shared');
  w.finish('solo');
  await leaving.waitReady(['shared', 'solo']);
  assert.equal(scheduler.state().tasks.waiting, 2);
  leaving.close();
  // x is running: cancelled; y, z were waiting: forgotten; solo is released; shared stays.
  await waitFor(() => w.cancels.includes('x') && w.released().includes('solo'), 'cancel x, release solo');
  assert.deepEqual(w.cancels, ['x']);
  assert.ok(!w.released().includes('shared'));
  await waitFor(() => scheduler.state().clients.length === 1, 'client gone');
  assert.deepEqual(scheduler.state().tasks, { released: 0, waiting: 0, ready: 0, processing: 0, memory: 1, erred: 0, total: 1 });
  // A late result of the cancelled task is dropped at once.
  w.finish('x');
  await waitFor(() => w.released().includes('x'), 'late x released');
  assert.equal(scheduler.state().tasks.total, 1);
});

test('resubmitting known keys does not recompute them', async (t) => {
  const scheduler = await startScheduler(t);
  const w = await FakeWorker.connect(t, scheduler);
  const first = await FakeClient.connect(t, scheduler);
  const graph = { a: task(), b: task('a'), c: task('b') };
  assert.deepEqual(await first.submit(graph, ['b', 'c']), { added: 3 });
  await first.waitReady(['b', 'c']);
  const second = await FakeClient.connect(t, scheduler);
  assert.deepEqual(await second.submit({ ...graph, d: task('c', 'b') }, ['c', 'd']), { added: 1 });
  await second.waitReady(['c', 'd']);
  assert.deepEqual(w.computes.map((c) => c.key), ['a', 'b', 'c', 'd']);
  assert.deepEqual(second.ready.get('c')?.holders, [w.data]);
  // Only the new task ran; a was released long ago and is not needed again.
  assert.deepEqual(w.released(), ['a']);
  // b: d is computed, and nobody else wants it; c: the second client still wants it.
  await first.release(['b', 'c']);
  await waitFor(() => w.released().includes('b'), 'b released');
  await sleep(20);
  assert.deepEqual(w.released(), ['a', 'b']);
  await second.release(['c', 'd']);
  await waitFor(() => w.released().length === 4, 'all released');
  assert.deepEqual(new Set(w.released()), new Set(['a', 'b', 'c', 'd']));
});

test('who-has answers from the records', async (t) => {
  const scheduler = await startScheduler(t);
  const w = await FakeWorker.connect(t, scheduler);
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ a: task() }, ['a']);
  await client.waitReady(['a']);
  assert.deepEqual(await client.whoHas(['a', 'nope']), { a: [w.data], nope: [] });
  assert.deepEqual(await w.channel.request('who-has', { keys: ['a'] }), { a: [w.data] });
});
