/** Poison tasks (allowedFailures, SPW_ERR_KILLED_WORKER) and per-task retries, with fake workers. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClient, FakeWorker, startScheduler, task } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

test('a task whose workers keep dying fails with SPW_ERR_KILLED_WORKER after allowedFailures; independent tasks finish', async (t) => {
  const scheduler = await startScheduler(t, { allowedFailures: 2 });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ poison: task(), after: task('poison'), other: task() }, ['after', 'other']);
  for (let death = 1; death <= 3; death++) {
    // Each victim gets both roots; it dies running the poison, while 'other' only waited there.
    const victim = await FakeWorker.connect(t, scheduler, { name: `victim-${death}`, auto: false });
    await waitFor(() => victim.inFlight.has('poison') && victim.inFlight.has('other'), 'roots placed');
    victim.start('poison');
    victim.close();
    await waitFor(() => scheduler.state().counters.workersLost === death, `death ${death} seen`);
  }
  await client.waitErred(['after']);
  const erred = client.erred.get('after');
  assert.equal(erred?.failedKey, 'poison');
  assert.equal(erred?.error.code, 'SPW_ERR_KILLED_WORKER');
  assert.equal(erred?.error.worker, 'victim-3');
  assert.match(erred?.error.message ?? '', /poison.*3 workers.*victim-3/);
  const healthy = await FakeWorker.connect(t, scheduler, { name: 'healthy' });
  await client.waitReady(['other']);
  assert.deepEqual(healthy.computes.map((c) => c.key), ['other']);
  assert.equal(scheduler.state().counters.tasksKilledWorkers, 1);
});

test('tasks merely queued on a dying worker are not held against; a retiring worker counts against none', async (t) => {
  const scheduler = await startScheduler(t, { allowedFailures: 0 });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ a: task(), b: task() }, ['a', 'b']);
  const first = await FakeWorker.connect(t, scheduler, { auto: false, nthreads: 1 });
  await waitFor(() => first.inFlight.size === 2, 'both sent');
  first.close(); // neither said task-started: both innocent
  const second = await FakeWorker.connect(t, scheduler, { auto: false });
  await waitFor(() => second.inFlight.size === 2, 'both sent again');
  second.start('a');
  second.channel.notify('worker-closing', {});
  await waitFor(() => scheduler.state().workers.some((w) => w.closing), 'closing seen');
  second.close(); // it said it was leaving: its started task is not suspected
  const third = await FakeWorker.connect(t, scheduler);
  await client.waitReady(['a', 'b']);
  assert.equal(third.finished, 2);
  const counters = scheduler.state().counters;
  assert.equal(counters.tasksKilledWorkers, 0);
  assert.equal(counters.workersLost, 1);
  assert.equal(counters.workersRetired, 1);
});

test('retries: a task that throws is run again up to its retries, then fails with its own error', async (t) => {
  const scheduler = await startScheduler(t);
  const client = await FakeClient.connect(t, scheduler);
  const worker = await FakeWorker.connect(t, scheduler, { auto: false });
  await client.submit({ flaky: { ...task(), retries: 2 }, doomed: { ...task(), retries: 1 } }, ['flaky', 'doomed']);
  const attempts = (key: string): number => worker.computes.filter((c) => c.key === key).length;
  await waitFor(() => attempts('flaky') === 1 && attempts('doomed') === 1, 'first attempts');
  worker.fail('flaky', 'once');
  worker.fail('doomed', 'once');
  await waitFor(() => attempts('flaky') === 2 && attempts('doomed') === 2, 'second attempts');
  worker.fail('flaky', 'twice');
  worker.fail('doomed', 'for good');
  await waitFor(() => attempts('flaky') === 3, 'third attempt');
  worker.finish('flaky');
  await client.waitReady(['flaky']);
  await client.waitErred(['doomed']);
  assert.match(client.erred.get('doomed')?.error.message ?? '', /for good/);
  assert.equal(scheduler.state().counters.tasksRetried, 3);
  assert.equal(scheduler.state().counters.tasksErred, 1);
});

test('retries must be a whole number', async (t) => {
  const scheduler = await startScheduler(t);
  const client = await FakeClient.connect(t, scheduler);
  await assert.rejects(client.submit({ x: { ...task(), retries: -1 } }, ['x']), /retries must be a whole number/);
  await assert.rejects(client.submit({ x: { ...task(), retries: 1.5 } }, ['x']), /retries must be a whole number/);
});
