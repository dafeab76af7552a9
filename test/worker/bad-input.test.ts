import assert from 'node:assert/strict';
import { readdir, truncate } from 'node:fs/promises';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Methods, ref } from '../../src/cluster/protocol.js';
import { garbageCollector } from '../../src/runtime/garbage-collection.js';
import { Worker } from '../../src/worker/index.js';
import { FakeScheduler, TASKS, fn } from './helpers.js';
import { cleanupScope } from '../helpers/cleanup.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait.js';
import { OWNER_FILE } from '../../src/folders/owner.js';

const gc = garbageCollector() ?? ((): void => assert.fail('no way to collect garbage here'));

let scheduler: FakeScheduler;
let a: Worker;
let b: Worker;
let dir: string;
const file = cleanupScope();

before(async () => {
  dir = await tempDir(file, 'spillway-bad-input-');
  scheduler = await FakeScheduler.start({ token: 't' });
  const options = { scheduler: scheduler.address, token: 't', memoryLimit: '128 MiB', nthreads: 1, monitorIntervalMs: false as const };
  a = await Worker.start({ ...options, name: 'a', localDirectory: dir });
  b = await Worker.start({ ...options, name: 'b' });
});
after(async () => {
  await Promise.all([a.close(), b.close()]);
  await scheduler.close();
  await file.end();
});

test('a compute-task whose args are not an array is answered with a typed task-erred', async () => {
  scheduler.channelOf(a.workerId).notify(Methods.computeTask, { key: 'bad-args', spec: { fn: { module: TASKS, name: 'add' }, args: 5 }, deps: {}, priority: 0 });
  await waitFor(() => scheduler.erred.some((e) => e.key === 'bad-args'), 'task-erred bad-args');
  const erred = scheduler.erred.find((e) => e.key === 'bad-args') ?? assert.fail();
  assert.equal(erred.error.code, 'SPW_ERR_INVALID_ARG');
  // the worker goes on
  scheduler.compute(a.workerId, 'ok', fn('add', 1, 2));
  await scheduler.finishedKey('ok');
});

async function files(root: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(root, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name !== OWNER_FILE) out.push(path.join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name));
  }
  return out;
}

test('a task whose local input cannot be read back reports it corrupt and drops the copies it fetched', async () => {
  scheduler.compute(b.workerId, 'r', fn('make', 2, 1024));
  scheduler.compute(a.workerId, 'k', fn('make', 1, 64 * 1024));
  await Promise.all([scheduler.finishedKey('r'), scheduler.finishedKey('k')]);
  await a.store.evict();
  for (let i = 0; i < 5; i++) {
    gc();
    await sleep(20);
  }
  assert.equal(a.store.where('k') === 'memory', false);
  for (const file of await files(dir)) await truncate(file, 10);
  scheduler.compute(a.workerId, 'use', fn('dot', ref('r'), ref('k')), { deps: { r: [b.server.address] } });
  // The unreadable copy is dropped and reported as missing data (the scheduler recomputes it
  // from its task), not as the task's error.
  await waitFor(() => scheduler.missing.some((m) => m.key === 'k'), 'use');
  const report = scheduler.missing.find((m) => m.key === 'k')!;
  assert.equal(report.task, 'use');
  assert.equal(report.corrupt, true);
  assert.equal(scheduler.erred.some((e) => e.key === 'use'), false, 'not an error of the task');
  assert.equal(a.store.has('k'), false, 'the unreadable copy is dropped');
  await sleep(50);
  assert.equal(a.store.has('r'), false, 'the fetched copy of r stays forever: the scheduler does not know of it');
});

test('a release-keys whose keys are a string, not an array, deletes nothing', async () => {
  scheduler.compute(a.workerId, 'q', fn('add', 1, 1));
  await scheduler.finishedKey('q');
  scheduler.channelOf(a.workerId).notify(Methods.releaseKeys, { keys: 'queue' });
  await sleep(100);
  assert.equal(a.store.has('q'), true, "release-keys { keys: 'queue' } deleted the key 'q'");
});
