import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import { Worker } from '../../src/worker/index.js';
import { cleanupScope } from '../helpers/cleanup.js';
import { tempDir } from '../helpers/temp-dir.js';
import { FakeScheduler, fn } from './helpers.js';

describe('worker: event loop and lifecycle', () => {
  const suite = cleanupScope();
  let dir: string;
  before(async () => {
    dir = await tempDir(suite, 'spw-worker-test-');
  });
  after(suite.end);

  test('a task blocking its thread for 2 s does not delay heartbeats', async () => {
    // 250 ms: the bound (2 intervals) must hold while other test files share this 2-core machine.
    const interval = 250;
    const scheduler = await FakeScheduler.start({ heartbeatIntervalMs: interval });
    const worker = await Worker.start({ scheduler: scheduler.address, memoryLimit: '64 MiB', nthreads: 1, monitorIntervalMs: false });
    try {
      let startedAt = 0;
      worker.once('task-started', () => (startedAt = performance.now()));
      scheduler.compute(worker.workerId, 'spin', fn('spin', 2000));
      await scheduler.finishedKey('spin');
      const endedAt = performance.now();
      assert.ok(((await worker.store.get('spin')) as number) >= 2000);
      const during = scheduler.heartbeats.filter((h) => h.at >= startedAt && h.at <= endedAt);
      assert.ok(during.length >= 6, `${during.length} heartbeats in 2 s`);
      const gaps = during.slice(1).map((h, i) => h.at - during[i].at);
      assert.ok(Math.max(...gaps) < 2 * interval, `largest gap ${Math.max(...gaps).toFixed(1)} ms`);
      assert.ok(during.some((h) => h.beat.executing === 1));
      assert.ok(Math.max(...during.map((h) => h.beat.eventLoopDelayMs)) < interval);
    } finally {
      await worker.close();
      await scheduler.close();
    }
  });

  test('a scheduler gone for longer than connectTimeoutMs shuts the worker down: store closed, spill folder removed, close emitted', async () => {
    const scheduler = await FakeScheduler.start();
    const worker = await Worker.start({ scheduler: scheduler.address, memoryLimit: '64 MiB', nthreads: 1, localDirectory: dir, monitorIntervalMs: false, schedulerConnectTimeoutMs: 300 });
    scheduler.compute(worker.workerId, 'big', fn('make', 1));
    await scheduler.finishedKey('big');
    await worker.store.evict();
    assert.equal((await readdir(dir)).length, 1, 'one spill folder');
    const closed = new Promise<void>((resolve) => worker.once('close', () => resolve()));
    await scheduler.close();
    await closed;
    assert.equal(worker.closed, true);
    assert.equal(worker.store.closed, true);
    assert.deepEqual(await readdir(dir), []);
  });

  test('a wrong token fails start and leaves nothing behind', async () => {
    const scheduler = await FakeScheduler.start({ token: 'right' });
    try {
      await assert.rejects(
        Worker.start({ scheduler: scheduler.address, token: 'wrong', memoryLimit: '64 MiB', nthreads: 1, localDirectory: dir }),
        { code: 'SPW_ERR_AUTH' },
      );
      assert.deepEqual(await readdir(dir), []);
      assert.equal(scheduler.workers.length, 0);
    } finally {
      await scheduler.close();
    }
  });
});
