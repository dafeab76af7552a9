import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ref } from '../../src/cluster/protocol.js';
import { Worker } from '../../src/worker/index.js';
import { FakeScheduler, fn } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

describe('worker: inputs a task reads last (`consumes`)', () => {
  let scheduler: FakeScheduler;
  let worker: Worker;

  before(async () => {
    scheduler = await FakeScheduler.start();
    worker = await Worker.start({ scheduler: scheduler.address, memoryLimit: '256 MiB', nthreads: 1, monitorIntervalMs: false });
  });
  after(async () => {
    await worker.close();
    await scheduler.close();
  });

  const resultOf = async (key: string): Promise<unknown> => await worker.store.get(key);

  test('an input the task reads last leaves the store, and the task gets it whole', async () => {
    const id = worker.workerId;
    scheduler.compute(id, 'x', fn('make', 2));
    scheduler.compute(id, 'y', fn('make', 2));
    await scheduler.finishedKey('x');
    await scheduler.finishedKey('y');
    scheduler.compute(id, 'sx', fn('sum', ref('x')), { consumes: ['x'] });
    scheduler.compute(id, 'sy', fn('sum', ref('y')));
    await scheduler.finishedKey('sx');
    await scheduler.finishedKey('sy');
    assert.equal(await resultOf('sx'), 2 * 1024 * 1024);
    assert.equal(await resultOf('sy'), 2 * 1024 * 1024);
    assert.equal(worker.store.has('x'), false, 'consumed: its memory went to the task');
    assert.equal(worker.store.has('y'), true, 'not marked: the store keeps its copy until released');
  });

  test("a failed task's input goes back to the store, whole", async () => {
    const id = worker.workerId;
    scheduler.compute(id, 'z', fn('make', 3));
    await scheduler.finishedKey('z');
    scheduler.compute(id, 'bad', fn('slowFail', ref('z'), 300), { consumes: ['z'] });
    await waitFor(() => !worker.store.has('z'), 'z taken out for the task while it runs');
    await waitFor(() => scheduler.erred.some((e) => e.key === 'bad'), 'bad erred');
    assert.equal(worker.store.has('z'), true);
    const z = (await worker.store.get('z')) as Float64Array;
    assert.equal(z.length, 1024 * 1024);
    assert.ok(z.every((v) => v === 3), 'every value as it was');
  });

  test('an input handed out elsewhere is copied, not taken', async () => {
    const id = worker.workerId;
    scheduler.compute(id, 'w', fn('make', 4));
    await scheduler.finishedKey('w');
    const held = (await worker.store.get('w')) as Float64Array; // someone else now reads its memory
    scheduler.compute(id, 'sw', fn('sum', ref('w')), { consumes: ['w'] });
    await scheduler.finishedKey('sw');
    assert.equal(await resultOf('sw'), 4 * 1024 * 1024);
    assert.equal(worker.store.has('w'), true);
    assert.equal(held.length, 1024 * 1024, 'the memory handed out was not moved');
  });
});
