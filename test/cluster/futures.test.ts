import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Client } from '../../src/client/client.js';
import { FutureReleasedError } from '../../src/client/errors.js';
import { fetchClusterState } from '../../src/client/state.js';
import { ref } from '../../src/cluster/protocol.js';
import { GraphError, MemoryHintError, TaskError } from '../../src/errors.js';
import { waitFor } from '../helpers/wait.js';
import { tempDir } from '../helpers/temp-dir.js';
import { tasks } from './fixtures/typed-tasks.js';
import { startCluster } from './helpers.js';

const runs = async (file: string): Promise<number> => (await readFile(file, 'utf8').catch(() => '')).split('\n').length - 1;

/** One cluster for the whole file: every subtest uses it and leaves nothing on it. */
test('typed tasks and futures on a local cluster', async (t) => {
  const cluster = await startCluster(t, { workers: 2, nthreads: 2 });
  const client = await Client.connect(cluster.address, { token: cluster.token });
  t.after(() => client.close());
  const dir = await tempDir(t);
  const state = () => fetchClusterState(cluster.httpAddress as string);
  /** The scheduler knows no task, no worker holds a key, and their stores (last heartbeats) are empty. */
  const empty = async (): Promise<boolean> => {
    const s = await state();
    return s.tasks.total === 0 && s.workers.every((w) => w.keys === 0 && w.lastHeartbeat?.memory.count === 0 && w.lastHeartbeat?.disk.count === 0);
  };
  const received = async (): Promise<number> => {
    const s = await state();
    return s.workers.reduce((n, w) => n + (w.lastHeartbeat?.receivedIntoMemoryBytes ?? 0) + (w.lastHeartbeat?.receivedIntoDiskBytes ?? 0), 0);
  };

  await t.test('compute runs lazy tasks and returns typed results; equal tasks share a key', async () => {
    const rows = tasks.load(3, 10);
    const [count, again] = await client.compute([tasks.total(rows), tasks.total(tasks.load(3, 10))]);
    assert.equal(count, 10 * 3 + 45);
    assert.equal(again, count);
    assert.equal(tasks.load(3, 10).key, rows.key);
    assert.notEqual(tasks.load(4, 10).key, rows.key);
    assert.notEqual(tasks.load.with({ pure: false })(3, 10).key, rows.key);
    await waitFor(empty, 'nothing left on the cluster');
  });

  await t.test('a future used as an argument moves its data worker to worker', async () => {
    const lengths = Array.from({ length: 10 }, (_, i) => 20_000 + i);
    const parts = client.map(tasks.fill, lengths, 2);
    await client.gather(parts);
    const holders = Object.values(await client.whoHas(parts.map((p) => p.key)));
    assert.equal(new Set(holders.map((list) => list[0].port)).size, 2, 'the parts are spread over both workers');
    const before = await received();
    const together = client.submit(tasks.sumParts, parts);
    assert.equal(await together.result(), 2 * lengths.reduce((a, b) => a + b, 0));
    // The parts held by the other worker came over, worker to worker (the heartbeats count them).
    const smallest = 8 * lengths[0];
    await waitFor(async () => (await received()) - before >= smallest, 'bytes received by a worker from the other');
    for (const f of [...parts, together]) await f.release();
    await waitFor(empty, 'every key released');
  });

  await t.test('a cancelled future releases its keys on the scheduler and the workers', async () => {
    const done = client.submit(tasks.fill, 1000, 1);
    await done.result();
    const running = client.submit(tasks.sleepy, 1500);
    await waitFor(async () => (await state()).tasks.processing === 1, 'the slow task running');
    await Promise.all([done.cancel(), running.cancel()]);
    assert.equal(done.status, 'cancelled');
    await assert.rejects(running.result(), (e: unknown) => e instanceof FutureReleasedError && e.reason === 'cancelled' && e.code === 'SPW_ERR_FUTURE_RELEASED');
    await waitFor(empty, 'the scheduler and the workers forgot both keys');
    const who = await client.whoHas([done.key, running.key]);
    assert.deepEqual(who, { [done.key]: [], [running.key]: [] });
  });

  await t.test('a future used after release gives a typed error', async () => {
    const f = client.submit(tasks.load, 1, 5);
    const pending = assert.rejects(f.result(), FutureReleasedError);
    await f.release();
    await pending;
    await assert.rejects(f.result(), FutureReleasedError);
    assert.throws(() => client.submit(tasks.total, f), FutureReleasedError);
    assert.throws(() => client.persist(tasks.total(f)), FutureReleasedError);
    await assert.rejects(client.compute(tasks.total(f)), FutureReleasedError);
    await assert.rejects(client.gather([f]), FutureReleasedError);
    await assert.rejects(client.compute({ t: { fn: tasks.total.fn, args: [f] } }, ['t']), FutureReleasedError);
    await f.release(); // twice: harmless
    // Another future of the same key is not affected by this one's release.
    const a = client.submit(tasks.load, 2, 5);
    const b = client.submit(tasks.load, 2, 5);
    assert.equal(a.key, b.key);
    a.release().catch(() => undefined);
    assert.equal((await b.result()).length, 5);
    await b.release();
    await waitFor(empty, 'every key released');
  });

  await t.test('using and await using release a future at the end of the block', async () => {
    let key: string;
    {
      await using f = client.submit(tasks.load, 9, 3);
      key = f.key;
      assert.equal((await f.result()).length, 3);
      assert.equal((await client.whoHas([key]))[key].length, 1);
    }
    await waitFor(empty, 'the key released after the block');
    {
      using g = client.submit(tasks.load, 10, 3);
      await g.result();
    }
    await waitFor(empty, 'the key released after the block');
  });

  await t.test('persist keeps results for later graphs: they are not computed again', async () => {
    const file = path.join(dir, 'persist-runs');
    const kept = client.persist(tasks.counted(file, 21));
    assert.equal(await kept.result(), 21);
    // A later graph of lazy tasks, a task given the future, and a graph dict naming its key.
    assert.equal(await client.compute(tasks.sum([tasks.counted(file, 21), 21])), 42);
    using plusOne = client.submit(tasks.sum, [kept, 1]);
    assert.equal(await plusOne.result(), 22);
    const [dict] = await client.compute<number>({ double: { fn: tasks.sum.fn, args: [[ref(kept.key), kept]] } }, ['double']);
    assert.equal(dict, 42);
    assert.equal(await runs(file), 1, 'the persisted task ran once');
    // persist of a graph dict: futures of its wanted keys.
    const [x] = client.persist<number>({ x: { fn: tasks.counted.fn, args: [file, 5] } }, ['x']);
    assert.equal(await client.compute(tasks.sum([x, x])), 10);
    assert.equal(await runs(file), 2);
    await Promise.all([kept.release(), x.release(), plusOne.release()]);
    await waitFor(empty, 'every key released');
  });

  await t.test('retries apply to submitted tasks; errors are typed', async () => {
    const file = path.join(dir, 'flaky-runs');
    using retried = client.submit(tasks.flaky.with({ retries: 2 }), file, 2);
    assert.equal(await retried.result(), 3);
    const failing = client.submit(tasks.flaky, path.join(dir, 'flaky-2'), 1);
    await assert.rejects(failing.result(), (e: unknown) => e instanceof TaskError && /failing run 1/.test(e.message));
    assert.equal(failing.status, 'error');
    await failing.release();
    // A task named after another export than its own: refused before anything runs.
    const { tasks: misnamed } = await import('./fixtures/misnamed-tasks.js');
    const refused = client.submit(misnamed.total, []);
    await assert.rejects(refused.result(), (e: unknown) => e instanceof GraphError && /another function/.test(e.message));
    assert.equal(refused.status, 'error');
    // A graph naming a refused future fails with its error.
    using dependent = client.submit(tasks.sum, [refused]);
    await assert.rejects(dependent.result(), GraphError);
    await Promise.all([refused.release(), retried.release(), dependent.release()]);
    await waitFor(empty, 'every key released');
  });

  await t.test('memory hints: a task runs only where its hint fits; one no worker can take fails', async () => {
    // Each worker has 64 MiB: with 40 MiB asked for, each runs one such task at a time (though it has two threads).
    const spans = client.map(tasks.span.with({ memory: '40 MiB' }), [300, 301, 302, 303], 0);
    const done = await client.gather(spans);
    for (const a of done) {
      for (const b of done) if (a !== b && a.pid === b.pid) assert.ok(a.end <= b.start || b.end <= a.start, 'two 40 MiB tasks overlapped on one 64 MiB worker');
    }
    const huge = client.submit(tasks.fill.with({ memory: '1 GiB' }), 10, 1);
    await assert.rejects(huge.result(), (e: unknown) => e instanceof MemoryHintError && e.code === 'SPW_ERR_MEMORY_HINT' && e.failedKey === huge.key);
    for (const f of [...spans, huge]) await f.release();
    await waitFor(empty, 'every key released');
  });

  await t.test('a future the program can no longer reach is released once it is collected', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    await (async () => {
      const f = client.submit(tasks.load, 11, 3);
      assert.equal((await f.result()).length, 3);
    })();
    await waitFor(async () => {
      gc();
      return empty();
    }, 'the collected future released');
  });
});
