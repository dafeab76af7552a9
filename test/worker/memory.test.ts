import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { ref } from '../../src/cluster/protocol.js';
import { checkInvariants } from '../../src/store/spill-store.js';
import { Worker, type WorkerOptions } from '../../src/worker/index.js';
import { FakeScheduler, deadAddress, fn } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

const MiB = 1024 * 1024;
const floats = (bytes: number, value = 1): Float64Array => new Float64Array(bytes / 8).fill(value);

describe('worker: memory-aware execution', () => {
  let scheduler: FakeScheduler;
  const workers: Worker[] = [];

  before(async () => {
    scheduler = await FakeScheduler.start();
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close()));
  });
  after(() => scheduler.close());

  async function start(options: Partial<WorkerOptions>): Promise<{ worker: Worker; started: string[] }> {
    const worker = await Worker.start({ scheduler: scheduler.address, memoryLimit: '64 MiB', nthreads: 1, monitorIntervalMs: false, ...options });
    workers.push(worker);
    const started: string[] = [];
    worker.on('task-started', (key: string) => started.push(key));
    return { worker, started };
  }

  test('a task whose inputs are in memory starts before a higher-priority one whose inputs are spilled', async () => {
    const { worker, started } = await start({ prefetch: 0 });
    worker.store.set('cold', floats(MiB, 1));
    await worker.store.evict();
    worker.store.set('hot', floats(MiB, 2));
    assert.equal(worker.store.where('cold'), 'disk');
    assert.equal(worker.store.where('hot'), 'memory');
    scheduler.compute(worker.workerId, 'blocker', fn('slow', 0, 300));
    await waitFor(() => started.includes('blocker'), 'blocker started');
    scheduler.compute(worker.workerId, 'uses-cold', fn('sum', ref('cold')), { priority: 0 });
    scheduler.compute(worker.workerId, 'uses-hot', fn('sum', ref('hot')), { priority: 10 });
    await Promise.all([scheduler.finishedKey('uses-cold'), scheduler.finishedKey('uses-hot')]);
    assert.deepEqual(started, ['blocker', 'uses-hot', 'uses-cold']);
    assert.equal(await worker.store.get('uses-cold'), MiB / 8);
  });

  test('spilled inputs of the next tasks are read back while the threads are busy', async () => {
    const { worker, started } = await start({});
    worker.store.set('cold2', floats(MiB, 1));
    await worker.store.evict();
    scheduler.compute(worker.workerId, 'blocker2', fn('slow', 0, 400));
    await waitFor(() => started.includes('blocker2'), 'blocker started');
    scheduler.compute(worker.workerId, 'next', fn('sum', ref('cold2')));
    await waitFor(() => worker.store.where('cold2') === 'memory', 'prefetch');
    assert.ok(!scheduler.finished.some((f) => f.key === 'blocker2'), 'read back before the thread was free');
    await scheduler.finishedKey('next');
  });

  test('while the store is paused no task starts and nothing is fetched; both go on after resume', async () => {
    const { worker, started } = await start({ memoryLimit: '10 MiB' });
    worker.store.set('p', floats(5 * MiB));
    worker.store.set('q', floats(4 * MiB));
    const lease = await worker.store.acquire(['p', 'q']); // pinned: spilling cannot relieve the pause
    assert.equal(worker.store.paused, true);
    const dead = await deadAddress();
    scheduler.compute(worker.workerId, 'waits', fn('add', 1, 2));
    scheduler.compute(worker.workerId, 'needs-fetch', fn('add', ref('elsewhere'), 1), { deps: { elsewhere: [dead] } });
    await waitFor(() => scheduler.heartbeats.some((h) => h.beat.workerId === worker.workerId && h.beat.paused), 'paused heartbeat');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(started, []);
    assert.equal(worker.queued, 2);
    assert.equal(worker.fetchFailures, 0, 'no fetch was tried');
    lease.release();
    await scheduler.finishedKey('waits');
    assert.equal(worker.store.paused, false);
    await waitFor(() => scheduler.missing.some((m) => m.task === 'needs-fetch'), 'fetch after resume');
  });

  test('inputs stay pinned in memory for the whole task, even under pressure and after release-keys', async () => {
    const { worker, started } = await start({ memoryLimit: '32 MiB' });
    scheduler.compute(worker.workerId, 'input', fn('make', 1));
    await scheduler.finishedKey('input');
    scheduler.compute(worker.workerId, 'held', fn('slowSum', ref('input'), 600));
    await waitFor(() => started.includes('held') && worker.store.stats().pinned.count === 1, 'pinned');
    for (let i = 0; i < 3; i++) worker.store.set(`filler-${i}`, floats(8 * MiB));
    await worker.store.evict();
    await worker.store.flush(); // writes the set itself started
    assert.equal(worker.store.where('input'), 'memory');
    assert.equal(worker.store.where('filler-0'), 'disk');
    // Released while its task runs: the key goes at once, the task keeps the version it pinned.
    scheduler.channelOf(worker.workerId).notify('release-keys', { keys: ['input'] });
    await waitFor(() => !worker.store.has('input'), 'released');
    await scheduler.finishedKey('held');
    assert.equal(await worker.store.get('held'), MiB);
    assert.deepEqual(worker.store[checkInvariants](), []);
    assert.equal(worker.store.stats().pinned.count, 0);
  });

  test('SharedArrayBuffer-backed inputs reach the thread without a copy; others are copied', async () => {
    const { worker } = await start({});
    const shared = new Float64Array(new SharedArrayBuffer(8 * MiB));
    const plain = floats(8 * MiB, 0);
    worker.store.set('shared', shared);
    worker.store.set('plain', plain);
    scheduler.compute(worker.workerId, 'w-shared', fn('writeInto', ref('shared'), 7, 42));
    scheduler.compute(worker.workerId, 'w-plain', fn('writeInto', ref('plain'), 7, 42));
    await Promise.all([scheduler.finishedKey('w-shared'), scheduler.finishedKey('w-plain')]);
    assert.equal(await worker.store.get('w-shared'), true);
    assert.equal(shared[7], 42, 'the thread wrote into the same memory');
    assert.equal(await worker.store.get('w-plain'), false);
    assert.equal(plain[7], 0, 'the thread had its own copy');
  });
});
