import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import type { Graph } from '../../src/cluster/protocol.js';
import { TaskError } from '../../src/errors.js';
import { fixture, startCluster } from './helpers.js';

/** The scheduler knows one 'wanted' per client and key: a client's computations share their keys. */
test('one compute failing does not release a key another compute of the same client still waits for', async (t) => {
  const cluster = await startCluster(t, { workers: 1, nthreads: 2 });
  const client = await Client.connect(cluster.address, { token: cluster.token });
  t.after(() => client.close());
  const x = { fn: fixture('sleep'), args: [400] };
  const failing: Graph = { x, bad: { fn: fixture('boom'), args: ['no'] } };
  const b = client.compute<number>({ x }, ['x']);
  const a = client.compute(failing, ['x', 'bad']);
  await assert.rejects(a, (e: unknown) => e instanceof TaskError);
  const settled = await Promise.race([
    b.then((v) => ({ value: v }), (e: unknown) => ({ error: e })),
    new Promise((resolve) => setTimeout(() => resolve('still pending after 5 s'), 5000)),
  ]);
  assert.deepEqual(settled, { value: [400] });
});
