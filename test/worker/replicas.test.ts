import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ref } from '../../src/cluster/protocol.js';
import { Worker } from '../../src/worker/index.js';
import { FakeScheduler, fn } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

let scheduler: FakeScheduler;
let a: Worker;
let b: Worker;

before(async () => {
  scheduler = await FakeScheduler.start({ token: 't' });
  const options = { scheduler: scheduler.address, token: 't', memoryLimit: '128 MiB', nthreads: 2, monitorIntervalMs: false as const };
  a = await Worker.start({ ...options, name: 'a' });
  b = await Worker.start({ ...options, name: 'b' });
  scheduler.compute(b.workerId, 'x', fn('make', 1, 1024));
  await scheduler.finishedKey('x');
});
after(async () => {
  await Promise.all([a.close(), b.close()]);
  await scheduler.close();
});

test('a key this worker computed and reported is kept, even if it first held it as a fetched copy', async () => {
  // a fetches x from b for a slow task...
  scheduler.compute(a.workerId, 'consumer', fn('slowSum', ref('x'), 400), { deps: { x: [b.server.address] } });
  await new Promise<void>((resolve) => a.once('task-started', () => resolve()));
  // ...then b is lost and the scheduler recomputes x on a, which reports it.
  scheduler.compute(a.workerId, 'x', fn('make', 1, 1024));
  await waitFor(() => scheduler.finished.some((f) => f.key === 'x' && f.workerId === a.workerId), 'x on a');
  await scheduler.finishedKey('consumer');
  await sleep(50);
  assert.equal(a.store.has('x'), true, 'a reported x as finished, then deleted it: the scheduler believes a holds it');
});
