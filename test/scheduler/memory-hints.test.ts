import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TaskSpec } from '../../src/cluster/protocol.js';
import { waitFor } from '../helpers/wait.js';
import { FakeClient, FakeWorker, sleep, startScheduler, task } from './helpers.js';

const MiB = 2 ** 20;
const hinted = (memory: number | string, ...deps: string[]): TaskSpec => ({ ...task(...deps), memory });

test('a task with a memory hint goes only to a worker with room for it, one at a time where only one fits', async (t) => {
  const scheduler = await startScheduler(t);
  const small = await FakeWorker.connect(t, scheduler, { auto: false, name: 'small', memoryLimit: 64 * MiB, nthreads: 4 });
  const big = await FakeWorker.connect(t, scheduler, { auto: false, name: 'big', memoryLimit: 256 * MiB, nthreads: 4 });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ h1: hinted('160 MiB'), h2: hinted(160 * MiB), plain: task() }, ['h1', 'h2', 'plain']);
  await waitFor(() => big.computes.length === 1 && small.computes.length + big.computes.length === 2, 'one hinted task and the plain one placed');
  assert.ok(!small.computes.some((c) => c.key.startsWith('h')), 'no hinted task on the small worker');
  const first = big.computes[0].key;
  assert.ok(first === 'h1' || first === 'h2');
  assert.equal(scheduler.state().workers.find((w) => w.name === 'big')?.reservedMemory, 160 * MiB);
  // The second waits while the first holds 160 of the big worker's 256 MiB...
  await sleep(100);
  assert.equal(big.computes.filter((c) => c.key.startsWith('h')).length, 1);
  // ...and goes there once it is done.
  big.finish(first, 10);
  await waitFor(() => big.computes.filter((c) => c.key.startsWith('h')).length === 2, 'the second hinted task placed');
  big.finish(big.computes[1].key, 10);
  for (const c of small.computes) small.finish(c.key, 10);
  await client.waitReady(['h1', 'h2', 'plain']);
});

test('a task no worker could ever take fails with SPW_ERR_MEMORY_HINT, and what depends on it', async (t) => {
  const scheduler = await startScheduler(t);
  const worker = await FakeWorker.connect(t, scheduler, { name: 'w', memoryLimit: 64 * MiB });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ input: task(), huge: hinted('1 GiB', 'input'), after: task('huge') }, ['after', 'huge']);
  await client.waitErred(['after', 'huge']);
  const error = client.erred.get('huge');
  assert.equal(error?.error.code, 'SPW_ERR_MEMORY_HINT');
  assert.equal(error?.failedKey, 'huge');
  assert.match(error?.error.message ?? '', /1\.0 GiB.*64\.0 MiB/);
  assert.equal(client.erred.get('after')?.failedKey, 'huge');
  assert.ok(!worker.computes.some((c) => c.key === 'input'), 'its input was not computed for nothing');
});

test('a hinted task waiting for the only worker it fits on fails when that worker leaves', async (t) => {
  const scheduler = await startScheduler(t);
  await FakeWorker.connect(t, scheduler, { name: 'small', memoryLimit: 64 * MiB });
  const big = await FakeWorker.connect(t, scheduler, { auto: false, name: 'big', memoryLimit: 256 * MiB, nthreads: 1 });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ a: hinted('200 MiB'), b: hinted('200 MiB') }, ['a', 'b']);
  await waitFor(() => big.computes.length === 1, 'one placed on big');
  const waiting = big.computes[0].key === 'a' ? 'b' : 'a';
  big.close();
  await client.waitErred([waiting]);
  assert.equal(client.erred.get(waiting)?.error.code, 'SPW_ERR_MEMORY_HINT');
});

test('the scheduler refuses a memory hint that is not a size', async (t) => {
  const scheduler = await startScheduler(t);
  const client = await FakeClient.connect(t, scheduler);
  await assert.rejects(client.submit({ x: hinted('plenty') }, ['x']), /memory must be a number of bytes or a size/);
  await assert.rejects(client.submit({ x: hinted(-1) }, ['x']), /memory must be/);
});
