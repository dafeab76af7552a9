/** The only worker (unsupervised) is killed by its task and nothing replaces it: the client gets NoWorkersError after noWorkersTimeoutMs (issue 33, item 4). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tempDir } from '../helpers/temp-dir.js';
import { Client } from '../../src/client/client.js';
import { CliProcess } from '../../src/client/processes.js';
import { NoWorkersError } from '../../src/errors.js';
import { Scheduler } from '../../src/scheduler/index.js';
import { ext } from '../helpers/suite.js';

const fn = (name: string): { module: string; name: string } => ({ module: new URL(`./fixtures/faults${ext}`, import.meta.url).href, name });

test('a computation with no worker left fails with SPW_ERR_NO_WORKERS after noWorkersTimeoutMs', { timeout: 60_000 }, async (t) => {
  const token = 'no-workers-test-token';
  const scheduler = await Scheduler.start({ token, heartbeatIntervalMs: 200, noWorkersTimeoutMs: 1500 });
  t.after(() => scheduler.close());
  const directory = await tempDir(t, 'spillway-no-workers-');
  const { host, port } = scheduler.address;
  const worker = new CliProcess(
    'worker',
    ['worker', '--no-supervisor', '--scheduler', `${host}:${port}`, '--memory-limit', '64MiB', '--nthreads', '1', '--local-directory', directory],
    { SPILLWAY_TOKEN: token },
    'pipe',
  );
  t.after(() => worker.stop(1_000));
  await worker.waitForEvent('ready', 30_000);
  const client = await Client.connect(scheduler.address, { token });
  t.after(() => client.close());
  const killedAt: number[] = [];
  void worker.exited.then(() => killedAt.push(Date.now()));
  await assert.rejects(client.compute({ oom: { fn: fn('killOwnProcess'), args: [] }, after: { fn: fn('sum'), args: [{ $ref: 'oom' }, 1] } }, ['after']), (err: unknown) => {
    assert.ok(err instanceof NoWorkersError, String(err));
    assert.equal(err.code, 'SPW_ERR_NO_WORKERS');
    assert.equal(err.key, 'after');
    assert.equal(err.failedKey, 'oom');
    assert.match(err.message, /no worker for \d+ s \(noWorkersTimeoutMs\)/);
    return true;
  });
  assert.equal(killedAt.length, 1, 'the worker was killed by its task');
  const waited = Date.now() - killedAt[0];
  assert.ok(waited >= 1_000 && waited < 20_000, `failed ${waited} ms after the worker died`);
  const state = scheduler.state();
  assert.equal(state.counters.tasksNoWorkers, 1);
  assert.equal(state.workers.length, 0);
});

test('noWorkersTimeoutMs must be a non-negative number', async () => {
  await assert.rejects(Scheduler.start({ noWorkersTimeoutMs: -1 }), { code: 'SPW_ERR_INVALID_ARG' });
});
