import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ref } from '../../src/cluster/protocol.js';
import { Worker } from '../../src/worker/index.js';
import { FakeScheduler, deadAddress, fn } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

describe('worker: inputs from peers', () => {
  let scheduler: FakeScheduler;
  let a: Worker;
  let b: Worker;

  before(async () => {
    scheduler = await FakeScheduler.start({ token: 't' });
    const options = { scheduler: scheduler.address, token: 't', memoryLimit: '128 MiB', nthreads: 1, monitorIntervalMs: false as const };
    a = await Worker.start({ ...options, name: 'a' });
    b = await Worker.start({ ...options, name: 'b' });
    // b holds two 8 MiB arrays and a small value.
    scheduler.compute(b.workerId, 'ones', fn('make', 1));
    scheduler.compute(b.workerId, 'twos', fn('make', 2));
    scheduler.compute(b.workerId, 'small', fn('add', 20, 1));
    await Promise.all(['ones', 'twos', 'small'].map((k) => scheduler.finishedKey(k)));
  });
  after(async () => {
    await Promise.all([a.close(), b.close()]);
    await scheduler.close();
  });

  test('fetches inputs held by another worker in one batch, computes, and drops the copies afterwards', async () => {
    const before = b.server.stats();
    scheduler.compute(a.workerId, 'dot', fn('dot', ref('ones'), ref('twos')), {
      deps: { ones: [b.server.address], twos: [b.server.address] },
    });
    const dot = await scheduler.finishedKey('dot');
    assert.equal(await a.store.get('dot'), 2 * 1024 * 1024);
    assert.ok(dot.fetchSeconds > 0);
    const after = b.server.stats();
    assert.equal(after.connectionsTotal - before.connectionsTotal, 1, 'one fetch for both keys');
    assert.equal(after.valuesServed - before.valuesServed, 2);
    // The fetched inputs were only copies: gone once no task here needs them; b still has them.
    assert.equal(a.store.has('ones'), false);
    assert.equal(a.store.has('twos'), false);
    assert.ok(b.store.has('twos'));
    scheduler.compute(a.workerId, 'pair', fn('add', ref('small'), ref('small')), { deps: { small: [b.server.address] } });
    await scheduler.finishedKey('pair');
    assert.equal(await a.store.get('pair'), 42);
  });

  test('a dead holder is skipped for the next one the scheduler named', async () => {
    const dead = await deadAddress();
    scheduler.compute(a.workerId, 'via-next', fn('sum', ref('ones')), { deps: { ones: [dead, b.server.address] } });
    await scheduler.finishedKey('via-next');
    assert.equal(await a.store.get('via-next'), 1024 * 1024);
    assert.ok(a.fetchFailures >= 1);
    assert.equal(scheduler.whoHasAsked.length, 0);
  });

  test('when every named holder fails, the worker asks who-has', async () => {
    const dead = await deadAddress();
    scheduler.whoHas = { small: [dead, b.server.address] };
    scheduler.compute(a.workerId, 'via-who-has', fn('add', ref('small'), 1), { deps: { small: [dead] } });
    await scheduler.finishedKey('via-who-has');
    assert.equal(await a.store.get('via-who-has'), 22);
    assert.deepEqual(scheduler.whoHasAsked.at(-1), ['small']);
  });

  test('when nobody has an input: missing-data, the task is dropped, the worker goes on', async () => {
    const dead = await deadAddress();
    scheduler.whoHas = {};
    scheduler.compute(a.workerId, 'orphan', fn('add', ref('gone'), 1), { deps: { gone: [dead, b.server.address] } });
    await waitFor(() => scheduler.missing.some((m) => m.task === 'orphan'), 'missing-data');
    const report = scheduler.missing.find((m) => m.task === 'orphan') ?? assert.fail();
    assert.equal(report.key, 'gone');
    assert.equal(report.workerId, a.workerId);
    assert.deepEqual(report.holders, [dead, b.server.address]);
    assert.equal(a.queued, 0);
    assert.ok(!scheduler.erred.some((e) => e.key === 'orphan'));
    scheduler.compute(a.workerId, 'still-alive', fn('add', 1, 1));
    await scheduler.finishedKey('still-alive');
  });

  test('named as the holder of a key it lacks (taken by a task that read it last): it says so in missing-data', async () => {
    scheduler.whoHas = { taken: [a.server.address] };
    scheduler.compute(a.workerId, 'after-taken', fn('add', ref('taken'), 1), { deps: { taken: [a.server.address] } });
    await waitFor(() => scheduler.missing.some((m) => m.task === 'after-taken'), 'missing-data');
    const report = scheduler.missing.find((m) => m.task === 'after-taken') ?? assert.fail();
    assert.equal(report.key, 'taken');
    assert.deepEqual(report.holders, [a.server.address], 'its own copy is the one that failed: the scheduler drops it, never sends the task back for it');
    assert.equal(a.queued, 0);
  });
});
