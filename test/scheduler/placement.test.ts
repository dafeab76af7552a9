import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Methods } from '../../src/cluster/protocol.js';
import { FakeClient, FakeWorker, startScheduler, task } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

const roots = (n: number): Record<string, ReturnType<typeof task>> => Object.fromEntries(Array.from({ length: n }, (_, i) => [`r${i + 1}`, task()]));

test('a task goes to the worker holding most of its input bytes; ties go to the least busy', async (t) => {
  const scheduler = await startScheduler(t);
  const a = await FakeWorker.connect(t, scheduler, { auto: false, name: 'a' });
  const b = await FakeWorker.connect(t, scheduler, { auto: false, name: 'b' });
  const client = await FakeClient.connect(t, scheduler);
  // Eight roots: each worker takes four (2 × nthreads + 2 in flight).
  await client.submit(roots(8), Object.keys(roots(8)));
  await waitFor(() => a.computes.length === 4 && b.computes.length === 4, 'roots placed');
  const onA = a.computes.map((c) => c.key);
  const onB = b.computes.map((c) => c.key);
  a.finish(onA[0], 1000);
  a.finish(onA[1], 10);
  b.finish(onB[0], 10);
  b.finish(onB[1], 10);
  await client.waitReady([onA[0], onA[1], onB[0], onB[1]]);

  // 1000 bytes on a against 20 on b: a, although a is busier afterwards.
  await client.submit({ big: task(onA[0], onB[0], onB[1]) }, ['big']);
  await waitFor(() => a.computes.some((c) => c.key === 'big'), 'big placed on a');
  const big = a.computes.find((c) => c.key === 'big');
  assert.deepEqual(big?.deps, { [onA[0]]: [a.data], [onB[0]]: [b.data], [onB[1]]: [b.data] });
  assert.ok(!b.computes.some((c) => c.key === 'big'));

  // 20 bytes on b against 10 on a: b.
  await client.submit({ small: task(onA[1], onB[0], onB[1]) }, ['small']);
  await waitFor(() => b.computes.some((c) => c.key === 'small'), 'small placed on b');

  // Equal bytes (10 and 10): a runs 3 tasks, b runs 3 tasks... make b busier first.
  b.finish('small', 10);
  await client.waitReady(['small']);
  // a: r3, r4, big in flight (3); b: r7, r8 (2). Tie → b, the less busy.
  await client.submit({ tie: task(onA[1], onB[0]) }, ['tie']);
  await waitFor(() => b.computes.some((c) => c.key === 'tie'), 'tie placed on b');
  assert.ok(!a.computes.some((c) => c.key === 'tie'));
  assert.equal(a.inFlight.size, 3);
});

test('a closing worker gets no new task even when it holds the inputs', async (t) => {
  const scheduler = await startScheduler(t);
  const a = await FakeWorker.connect(t, scheduler, { auto: false });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ x: task() }, ['x']);
  await waitFor(() => a.computes.length === 1, 'x placed');
  a.finish('x', 5000);
  await client.waitReady(['x']);
  const b = await FakeWorker.connect(t, scheduler, { auto: false });
  a.channel.notify(Methods.workerClosing);
  await waitFor(() => scheduler.state().workers.some((w) => w.closing), 'a closing');
  await client.submit({ y: task('x') }, ['y']);
  await waitFor(() => b.computes.some((c) => c.key === 'y'), 'y placed on b');
  assert.deepEqual(b.computes[0].deps, { x: [a.data] });
  assert.equal(a.computes.length, 1);
});

test('tasks are sent in priority order, at most 2 × nthreads + 2 at a time per worker', async (t) => {
  const scheduler = await startScheduler(t);
  const a = await FakeWorker.connect(t, scheduler, { auto: false, nthreads: 2 });
  const client = await FakeClient.connect(t, scheduler);
  const graph = roots(20);
  const result = await client.submit(graph, Object.keys(graph));
  assert.equal(result.added, 20);
  await waitFor(() => a.computes.length === 6, 'six in flight');
  const priorities = a.computes.map((c) => c.priority);
  assert.deepEqual(priorities, [...priorities].sort((x, y) => x - y));
  assert.deepEqual(scheduler.state().tasks, { ...scheduler.state().tasks, processing: 6, ready: 14 });
  for (const c of [...a.computes]) a.finish(c.key);
  await waitFor(() => a.computes.length === 12, 'next six');
  assert.ok(Math.min(...a.computes.slice(6).map((c) => c.priority)) > Math.max(...priorities));
});

test('an idle worker steals from a saturated one, whichever registered first', async (t) => {
  for (const holderIndex of [0, 1]) {
    const scheduler = await startScheduler(t);
    const workers = [await FakeWorker.connect(t, scheduler, { auto: false }), await FakeWorker.connect(t, scheduler, { auto: false })];
    const holder = workers[holderIndex];
    const idle = workers[1 - holderIndex];
    const client = await FakeClient.connect(t, scheduler);
    // Eight roots, four on each worker; one of the holder's is big, everything else small.
    await client.submit(roots(8), Object.keys(roots(8)));
    await waitFor(() => workers.every((w) => w.computes.length === 4), 'roots placed');
    const big = holder.computes[0].key;
    for (const w of workers) for (const c of w.computes) w.finish(c.key, c.key === big ? 5000 : 10);
    await client.waitReady(Object.keys(roots(8)));
    // Twenty tasks reading the big root: all queued for its holder.
    const graph = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`t${i}`, task(big)]));
    await client.submit(graph, Object.keys(graph));
    await waitFor(() => holder.inFlight.size === 4, 'the holder saturated');
    // When the idle worker came first in the scheduler's pass over free slots, it looked at
    // the holder before the holder had refilled, saw it not saturated, and never stole.
    holder.finish([...holder.inFlight.keys()][0], 10);
    await waitFor(() => idle.computes.length > 4, `the idle worker (registered ${holderIndex === 1 ? 'first' : 'second'}) given work`);
    assert.ok(idle.computes.slice(4).every((c) => c.key.startsWith('t')));
  }
});

test('a task is sent `followed` when a dependent waits for it alone', async (t) => {
  const scheduler = await startScheduler(t);
  const a = await FakeWorker.connect(t, scheduler, { auto: false });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ x: task(), y: task('x'), p: task(), q: task(), r: task('p', 'q') }, ['y', 'r']);
  await waitFor(() => a.computes.length === 3, 'roots placed');
  const followed = Object.fromEntries(a.computes.map((c) => [c.key, c.followed === true]));
  assert.deepEqual(followed, { x: true, p: false, q: false });
  a.finish('p', 10);
  await waitFor(() => a.computes.length === 3 && a.inFlight.size === 2, 'p done');
  a.finish('x', 10);
  await waitFor(() => a.computes.some((c) => c.key === 'y'), 'y placed');
  assert.equal(a.computes.find((c) => c.key === 'y')?.followed, undefined, 'nothing depends on y');
});

test('a task is sent the inputs it reads last as `consumes`: none another pending task or a client needs', async (t) => {
  const scheduler = await startScheduler(t);
  const a = await FakeWorker.connect(t, scheduler, { auto: false });
  const client = await FakeClient.connect(t, scheduler);
  // x: read by y alone. s: read by u and v. w: read by z, and wanted by the client itself.
  await client.submit({ x: task(), y: task('x'), s: task(), u: task('s'), v: task('s'), w: task(), z: task('w') }, ['y', 'u', 'v', 'w', 'z']);
  await waitFor(() => a.computes.length === 3, 'roots placed');
  for (const key of ['x', 's', 'w']) a.finish(key, 10);
  await waitFor(() => ['y', 'u', 'z'].every((k) => a.computes.some((c) => c.key === k)), 'dependents placed');
  const consumes = (key: string): string[] | undefined => a.computes.find((c) => c.key === key)?.consumes;
  assert.deepEqual(consumes('y'), ['x']);
  // u and v are sent together, each while the other is pending: neither reads s last.
  await waitFor(() => a.computes.some((c) => c.key === 'v'), 'v placed');
  assert.equal(consumes('u'), undefined, 'v still needs s');
  assert.equal(consumes('v'), undefined, 'u still needs s');
  assert.equal(consumes('z'), undefined, 'the client wants w');
  assert.equal(consumes('x'), undefined, 'a root reads nothing');
});
