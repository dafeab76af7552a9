/** The scheduler dies while a client waits: the computation fails with a clear error, and nothing is left behind. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import { SchedulerLostError } from '../../src/client/errors.js';
import { alive } from '../helpers/proc.js';
import { fixture, startCluster } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

test('a lost scheduler rejects pending computes with SchedulerLostError; the workers exit', async (t) => {
  const cluster = await startCluster(t);
  const client = await Client.connect(cluster.address, { token: cluster.token });
  t.after(() => client.close());
  const pending = client.compute({ slow: { fn: fixture('sleep'), args: [30_000] } }, ['slow']);
  await new Promise((resolve) => setTimeout(resolve, 500));
  process.kill(cluster.schedulerPid, 'SIGKILL');
  await assert.rejects(pending, (err: unknown) => {
    assert.ok(err instanceof SchedulerLostError, String(err));
    assert.equal(err.code, 'SPW_ERR_SCHEDULER_LOST');
    assert.match(err.message, new RegExp(`lost the connection to the scheduler at ${cluster.address}`));
    return true;
  });
  await assert.rejects(client.compute({ x: { fn: fixture('add'), args: [1, 2] } }, ['x']), SchedulerLostError);
  // Workers without a scheduler shut themselves down.
  await waitFor(() => cluster.workers.every((pid) => !alive(pid)), 'the workers to exit', 15_000);
});
