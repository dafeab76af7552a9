import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ref } from '../../src/cluster/protocol.js';
import { SpillStore } from '../../src/store/spill-store.js';
import { DataClient } from '../../src/transfer/client.js';
import { Worker } from '../../src/worker/index.js';
import { FakeScheduler, TASKS, fn } from './helpers.js';
import { waitFor } from '../helpers/wait.js';
import { ext } from '../helpers/suite.js';

describe('worker: registration, tasks, errors', () => {
  let scheduler: FakeScheduler;
  let worker: Worker;

  before(async () => {
    scheduler = await FakeScheduler.start({ token: 'secret' });
    worker = await Worker.start({ scheduler: scheduler.address, token: 'secret', memoryLimit: '256 MiB', nthreads: 2, monitorIntervalMs: false });
  });
  after(async () => {
    await worker.close();
    await scheduler.close();
  });

  test('registers with its data address, limits and pid, then sends heartbeats', async () => {
    assert.equal(scheduler.workers.length, 1);
    const { params } = scheduler.workers[0];
    assert.deepEqual(params.data, worker.server.address);
    assert.equal(params.memoryLimit, 256 * 1024 * 1024);
    assert.equal(params.nthreads, 2);
    assert.equal(params.pid, process.pid);
    await waitFor(() => scheduler.heartbeats.length >= 2, 'two heartbeats');
    const { beat } = scheduler.heartbeats.at(-1) ?? assert.fail('no heartbeat');
    assert.equal(beat.workerId, worker.workerId);
    assert.equal(typeof beat.eventLoopDelayMs, 'number');
    assert.ok(beat.rss > 0);
    assert.equal(beat.paused, false);
    if (process.platform === 'linux') {
      // The loop thread's times since the worker started, from the second heartbeat on.
      await waitFor(() => typeof scheduler.heartbeats.at(-1)?.beat.loopRunSeconds === 'number', 'a heartbeat with the loop\'s times');
      const later = scheduler.heartbeats.at(-1)?.beat ?? assert.fail('no heartbeat');
      assert.ok(typeof later.loopRunSeconds === 'number' && later.loopRunSeconds > 0, `ran ${later.loopRunSeconds}`);
      assert.ok(typeof later.loopWaitSeconds === 'number' && later.loopWaitSeconds >= 0, `waited ${later.loopWaitSeconds}`);
    }
  });

  test('heartbeats report how late the delay monitor ran: about 0 idle, a block past its tick', async () => {
    // The worker runs in this process, so this test's own loop is the worker's. Idle, most
    // ticks are on time; Node's gaps between ticks would read at least the 10 ms tick.
    const from = scheduler.heartbeats.length;
    await waitFor(() => scheduler.heartbeats.length >= from + 10, 'ten heartbeats');
    const idle = scheduler.heartbeats.slice(from + 1).map((h) => h.beat.eventLoopDelayP99Ms ?? Infinity);
    assert.ok(Math.min(...idle) < 8, `idle p99s ${idle.join(', ')} ms`);
    const blocked = scheduler.heartbeats.length;
    const until = performance.now() + 150;
    while (performance.now() < until); // blocks the loop
    await waitFor(() => scheduler.heartbeats.length >= blocked + 2, 'two heartbeats after the block');
    const worst = Math.max(...scheduler.heartbeats.slice(blocked).map((h) => h.beat.eventLoopDelayMs));
    assert.ok(worst >= 130, `worst ${worst} ms after a 150 ms block`);
  });

  test('computes a chain of tasks; results are served by its DataServer', async () => {
    const id = worker.workerId;
    scheduler.compute(id, 'x', fn('make', 2));
    scheduler.compute(id, 'y', fn('make', 3));
    scheduler.compute(id, 'sx', fn('sum', ref('x')));
    scheduler.compute(id, 'sy', fn('sum', ref('y')));
    scheduler.compute(id, 'total', fn('add', ref('sx'), ref('sy')));
    const total = await scheduler.finishedKey('total');
    assert.equal(total.where, 'memory');
    assert.ok(total.computeSeconds >= 0 && total.fetchSeconds >= 0);
    const x = await scheduler.finishedKey('x');
    assert.ok(x.size >= 8 * 1024 * 1024 && x.size < 8 * 1024 * 1024 + 1024, `size ${x.size}`);
    const store = await SpillStore.open({ memoryLimit: '64 MiB', monitorIntervalMs: false });
    try {
      const client = new DataClient({ token: 'secret' });
      const result = await client.fetch(worker.server.address, ['total', 'x'], store);
      assert.deepEqual(result.missing, []);
      assert.equal(await store.get('total'), 1024 * 1024 * 5);
      const xs = (await store.get('x')) as Float64Array;
      assert.equal(xs.length, 1024 * 1024);
      assert.equal(xs[12345], 2);
    } finally {
      await store.close();
    }
  });

  test('a throwing task is reported with its message and stack; the worker goes on', async () => {
    const id = worker.workerId;
    scheduler.compute(id, 'boom', fn('fail', 'it broke'));
    await waitFor(() => scheduler.erred.some((e) => e.key === 'boom'), 'task-erred');
    const { error } = scheduler.erred.find((e) => e.key === 'boom') ?? assert.fail();
    assert.equal(error.name, 'TypeError');
    assert.equal(error.message, 'it broke');
    assert.match(error.stack ?? '', /fixtures[/\\]tasks\.ts/);
    scheduler.compute(id, 'after-boom', fn('add', 40, 2));
    await scheduler.finishedKey('after-boom');
    assert.equal(await worker.store.get('after-boom'), 42);
  });

  test('an unknown export or module is a task-erred with a stable code', async () => {
    const id = worker.workerId;
    scheduler.compute(id, 'nofn', fn('nope'));
    scheduler.compute(id, 'notfn', fn('notAFunction'));
    scheduler.compute(id, 'nomod', { fn: { module: new URL(`./fixtures/missing${ext}`, TASKS).href, name: 'x' }, args: [] });
    await waitFor(() => ['nofn', 'notfn', 'nomod'].every((k) => scheduler.erred.some((e) => e.key === k)), 'three errors');
    const code = (key: string): string | undefined => scheduler.erred.find((e) => e.key === key)?.error.code;
    assert.equal(code('nofn'), 'SPW_ERR_TASK_FUNCTION');
    assert.equal(code('notfn'), 'SPW_ERR_TASK_FUNCTION');
    assert.equal(code('nomod'), 'SPW_ERR_TASK_IMPORT');
    assert.equal(worker.store.has('nofn'), false);
  });

  test('release-keys deletes; cancel-task drops a queued task', async () => {
    const id = worker.workerId;
    scheduler.compute(id, 'r1', fn('add', 1, 1));
    await scheduler.finishedKey('r1');
    assert.ok(worker.store.has('r1'));
    scheduler.channelOf(id).notify('release-keys', { keys: ['r1'] });
    await waitFor(() => !worker.store.has('r1'), 'r1 deleted');
    // Two threads busy, so the third task waits in the queue until cancelled.
    scheduler.compute(id, 'busy1', fn('slow', 1, 300));
    scheduler.compute(id, 'busy2', fn('slow', 2, 300));
    scheduler.compute(id, 'cancelled', fn('add', 1, 2));
    await waitFor(() => worker.queued === 1, 'queued task');
    scheduler.channelOf(id).notify('cancel-task', { key: 'cancelled' });
    await scheduler.finishedKey('busy2');
    await scheduler.finishedKey('busy1');
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(worker.queued, 0);
    assert.equal(worker.store.has('cancelled'), false);
    assert.ok(!scheduler.finished.some((f) => f.key === 'cancelled'));
  });
});
