/** Messages that were on their way when the scheduler changed its mind: a removed worker's result, a result that crossed a release. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Methods } from '../../src/cluster/protocol.js';
import type { Logger } from '../../src/scheduler/log.js';
import { FakeClient, FakeWorker, sleep, startScheduler, task } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

test('a task-finished already on its way when the scheduler times the worker out does not leave the key "in memory" on a removed worker', async (t) => {
  const hooks: { onRemove?: () => void } = {};
  const logger: Logger = {
    debug: () => undefined,
    info: () => undefined,
    error: () => undefined,
    warn: (_obj, msg) => {
      if (msg === 'worker missed its heartbeats; removing it') hooks.onRemove?.();
    },
  };
  const scheduler = await startScheduler(t, { heartbeatIntervalMs: 20, workerTimeoutMs: 150, logger });
  const slow = await FakeWorker.connect(t, scheduler, { auto: false, heartbeats: false });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ a: task() }, ['a']);
  await waitFor(() => slow.computes.length === 1, 'a sent to the slow worker');
  // The worker finishes 'a' just as the scheduler gives up on it: the message is in flight.
  hooks.onRemove = () => {
    hooks.onRemove = undefined;
    slow.finish('a');
  };
  await waitFor(() => slow.closed, 'the slow worker is removed');
  const healthy = await FakeWorker.connect(t, scheduler);
  // 'a' must be computed again by the healthy worker (or be held by a live worker).
  await waitFor(() => {
      const ready = client.ready.get('a');
      return ready !== undefined && ready.holders.some((h) => h.port === healthy.data.port);
    }, 'a ready on a live worker').catch((err) => {
    assert.fail(`${(err as Error).message}; key-ready seen: ${JSON.stringify(client.ready.get('a'))}; state: ${JSON.stringify(scheduler.state().tasks)}; who-has via healthy computes: ${healthy.computes.map((c) => c.key)}`);
  });
});

test('a task-finished that crossed a release-keys is not taken as a copy the worker still holds', async (t) => {
  const scheduler = await startScheduler(t);
  const w = await FakeWorker.connect(t, scheduler, { auto: false });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ k: task() }, ['k']);
  await waitFor(() => w.computes.length === 1, 'k sent to w');
  // Released (cancel-task on its way) and wanted again at once: w is asked for k a second time.
  await client.release(['k']);
  await client.submit({ k: task() }, ['k']);
  await waitFor(() => w.computes.length === 2, 'k sent to w again');
  // w ran k for the first compute-task; the scheduler takes it as the answer to the second one.
  w.finish('k');
  await client.waitReady(['k']);
  // The client no longer wants k: release-keys goes to w ...
  await client.release(['k']);
  await waitFor(() => w.released().includes('k') && !w.store.has('k'), 'k released on w');
  // ... while w, which had run k a second time (the second compute-task), reports it: that message is
  // already on the wire and reaches the scheduler after the client asked for k again and x got it.
  w.channel.notify(Methods.workerClosing); // only so that k goes to x
  const x = await FakeWorker.connect(t, scheduler, { auto: false });
  client.ready.clear();
  await client.submit({ k: task() }, ['k']);
  await waitFor(() => x.computes.some((c) => c.key === 'k'), 'k sent to x');
  w.channel.notify(Methods.taskFinished, { workerId: w.id, key: 'k', size: 100, where: 'memory', computeSeconds: 0, fetchSeconds: 0 });
  await sleep(100);
  const where = (await client.whoHas(['k'])).k;
  for (const holder of where) {
    const worker = holder.port === w.data.port ? w : x;
    assert.ok(worker.store.has('k'), `the scheduler says ${holder.port === w.data.port ? 'w' : 'x'} holds k, which it released; x cancelled: ${x.cancels.includes('k')}`);
  }
});

test('a second close() waits for the first', async (t) => {
  const logged: string[] = [];
  const logger: Logger = { debug: () => undefined, warn: () => undefined, error: () => undefined, info: (_obj, msg) => void logged.push(msg ?? '') };
  const scheduler = await startScheduler(t, { logger });
  await FakeWorker.connect(t, scheduler);
  const first = scheduler.close();
  await scheduler.close();
  assert.ok(logged.includes('scheduler closed'), 'the second close resolved before the scheduler had closed');
  await first;
});
