import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClient, FakeWorker, sleep, startScheduler, task } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

const sumGraph = (n: number): Record<string, ReturnType<typeof task>> => {
  const graph: Record<string, ReturnType<typeof task>> = {};
  for (let i = 1; i <= n; i++) graph[`x${i}`] = task();
  graph.total = task(...Object.keys(graph));
  return graph;
};

test('a worker whose connection drops mid-graph: its tasks and the keys only it held are recomputed', async (t) => {
  const scheduler = await startScheduler(t);
  const a = await FakeWorker.connect(t, scheduler, { auto: false });
  const b = await FakeWorker.connect(t, scheduler, { auto: false });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit(sumGraph(8), ['total']);
  await waitFor(() => a.computes.length === 4 && b.computes.length === 4, 'roots placed');
  const onA = a.computes.map((c) => c.key);
  a.finish(onA[0]);
  a.finish(onA[1]);
  for (const c of b.computes) b.finish(c.key);
  await waitFor(() => scheduler.state().tasks.memory === 6, 'six in memory');
  a.close();
  // onA[0..1] were held only by a, onA[2..3] were running there: all four run on b.
  await waitFor(() => b.computes.length === 8, 'a’s work moved to b');
  assert.deepEqual(new Set(b.computes.slice(4).map((c) => c.key)), new Set(onA));
  for (const c of b.computes.slice(4)) b.finish(c.key);
  await waitFor(() => b.computes.some((c) => c.key === 'total'), 'total sent');
  const total = b.computes.find((c) => c.key === 'total');
  assert.ok(Object.values(total?.deps ?? {}).every((holders) => holders.length === 1 && holders[0].port === b.data.port));
  b.finish('total');
  await client.waitReady(['total']);
  const state = scheduler.state();
  assert.equal(state.counters.workersLost, 1);
  assert.equal(state.counters.tasksRecomputed, 2);
  assert.equal(state.workers.length, 1);
});

test('a worker that stops heartbeating is removed and its work is redone elsewhere', async (t) => {
  const scheduler = await startScheduler(t, { heartbeatIntervalMs: 20, workerTimeoutMs: 150 });
  const silent = await FakeWorker.connect(t, scheduler, { auto: false, heartbeats: false });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ a: task(), b: task('a') }, ['b']);
  await waitFor(() => silent.computes.length === 1, 'a sent');
  silent.finish('a');
  await waitFor(() => silent.computes.length === 2, 'b sent');
  const healthy = await FakeWorker.connect(t, scheduler);
  await client.waitReady(['b'], 3000);
  assert.deepEqual(client.ready.get('b')?.holders, [healthy.data]);
  assert.deepEqual(healthy.computes.map((c) => c.key), ['a', 'b']);
  await waitFor(() => silent.closed, 'the silent worker’s channel closed');
  assert.equal(scheduler.state().counters.workersLost, 1);
  // The healthy one heartbeats and stays.
  await sleep(200);
  assert.equal(scheduler.state().workers.length, 1);
  assert.notEqual(scheduler.state().workers[0].lastHeartbeat, null);
});

test('missing-data: the failed holder is dropped, the key recomputed, the task sent again', async (t) => {
  const scheduler = await startScheduler(t);
  const a = await FakeWorker.connect(t, scheduler, { auto: false });
  const b = await FakeWorker.connect(t, scheduler, { auto: false });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ p: task(), q: task(), r: task(), s: task(), u: task() }, ['p', 'q', 'r', 's', 'u']);
  await waitFor(() => a.computes.length === 4 && b.computes.length === 1, 'roots placed');
  // a: p q r s; b: u.
  a.finish('p', 10);
  b.finish('u', 1000);
  await client.submit({ t: task('p', 'u') }, ['t']);
  await waitFor(() => b.computes.some((c) => c.key === 't'), 't on b (holds more bytes)');
  assert.deepEqual(b.computes.find((c) => c.key === 't')?.deps, { p: [a.data], u: [b.data] });
  b.missing('t', 'p', [a.data]);
  await waitFor(() => a.released().includes('p'), 'a told to drop its copy of p');
  const recompute = (): boolean => [...a.computes, ...b.computes].filter((c) => c.key === 'p').length === 2;
  await waitFor(recompute, 'p computed again');
  const again = a.computes.filter((c) => c.key === 'p').length === 2 ? a : b;
  again.finish('p', 10);
  await waitFor(() => b.computes.filter((c) => c.key === 't').length === 2 || a.computes.some((c) => c.key === 't'), 't sent again');
  const resent = [...a.computes, ...b.computes].filter((c) => c.key === 't').at(-1);
  assert.deepEqual(resent?.deps.p, [again.data]);
  assert.equal(scheduler.state().counters.tasksRecomputed, 1);
});

test('a task error reaches every wanted key depending on it, with failedKey; the worker keeps working', async (t) => {
  const scheduler = await startScheduler(t);
  const w = await FakeWorker.connect(t, scheduler, { auto: false });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ a: task(), b: task('a'), c: task('b'), d: task('b'), ok: task() }, ['c', 'd', 'ok']);
  await waitFor(() => w.computes.length === 2, 'a and ok sent');
  w.fail('a', 'boom');
  w.finish('ok');
  await waitFor(() => client.erred.size === 2 && client.ready.has('ok'), 'c and d erred');
  for (const key of ['c', 'd']) {
    const erred = client.erred.get(key);
    assert.equal(erred?.failedKey, 'a');
    assert.equal(erred?.error.name, 'RangeError');
    assert.equal(erred?.error.message, 'boom');
    assert.match(erred?.error.stack ?? '', /at f/);
  }
  assert.equal(scheduler.state().tasks.erred, 4);
  assert.equal(scheduler.state().counters.tasksErred, 1);
  // Another client asking for an erred key hears at once.
  const other = await FakeClient.connect(t, scheduler);
  await other.submit({}, ['d']);
  await waitFor(() => other.erred.has('d'), 'd erred for the other client');
  await client.release(['c', 'd', 'ok']);
  await other.release(['d']);
  await waitFor(() => scheduler.state().tasks.total === 0, 'all forgotten');
});
