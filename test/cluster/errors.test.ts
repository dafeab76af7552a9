/** A task that throws, bad graphs, a wrong token, a client that leaves: on one real cluster. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import { builtins, ref, type Graph } from '../../src/cluster/protocol.js';
import { GraphError, TaskError } from '../../src/errors.js';
import { AuthError } from '../../src/transfer/errors.js';
import { fixture, MiB, startCluster } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

test('errors and releases on a real cluster', async (t) => {
  const cluster = await startCluster(t);
  const client = await Client.connect(cluster.address, { token: cluster.token });
  t.after(() => client.close());

  await t.test('a task that throws rejects with TaskError carrying the remote message and stack; the cluster lives on', async () => {
    const graph: Graph = {
      bad: { fn: fixture('boom'), args: ['the sky fell'] },
      after: { fn: fixture('add'), args: [ref('bad'), 1] },
    };
    const err = await client.compute(graph, ['after']).then(
      () => assert.fail('compute should reject'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof TaskError, String(err));
    assert.equal(err.key, 'after');
    assert.equal(err.failedKey, 'bad');
    assert.equal(err.remoteName, 'FixtureError');
    assert.match(err.message, /the sky fell/);
    assert.match(err.remoteStack ?? '', /boom/);
    assert.match(err.remoteStack ?? '', /fixtures\/tasks\.[jt]s:\d+/, 'the stack names the task module');

    const [sum] = await client.compute<number>({ a: { fn: fixture('add'), args: [2, 3] }, b: { fn: fixture('add'), args: [ref('a'), 10] } }, ['b']);
    assert.equal(sum, 15);
  });

  await t.test("a TaskError carries the worker's error code as remoteCode (docs/graphs.md: a bad getitem index)", async () => {
    const graph: Graph = {
      parts: { fn: fixture('add'), args: [1, 2] },
      piece: { fn: builtins.getitem, args: [[ref('parts')], 5] },
      boom: { fn: fixture('boom'), args: ['no code'] },
    };
    const builtin = await client.compute(graph, ['piece']).then(() => assert.fail('compute should reject'), (e: unknown) => e);
    assert.ok(builtin instanceof TaskError, String(builtin));
    assert.equal(builtin.code, 'SPW_ERR_TASK');
    assert.equal(builtin.remoteCode, 'SPW_ERR_BUILTIN_ARGUMENT');
    const thrown = await client.compute(graph, ['boom']).then(() => assert.fail('compute should reject'), (e: unknown) => e);
    assert.ok(thrown instanceof TaskError, String(thrown));
    assert.equal(thrown.remoteCode, undefined, 'a plain Error has no code');
  });

  await t.test('bad graphs are refused with GraphError before anything runs', async () => {
    const before = (await cluster.state()).tasks.total;
    const cases: Array<[string, Graph, string[], RegExp]> = [
      ['cycle', { x: { fn: fixture('add'), args: [ref('y'), 1] }, y: { fn: fixture('add'), args: [ref('x'), 1] } }, ['x'], /cycle/i],
      ['missing key', { x: { fn: fixture('add'), args: [ref('nowhere'), 1] } }, ['x'], /nowhere/],
      ['unknown function', { x: { fn: fixture('noSuchFunction'), args: [] } }, ['x'], /noSuchFunction/],
      ['not a function', { x: { fn: fixture('notAFunction'), args: [] } }, ['x'], /notAFunction/],
      ['unknown module', { x: { fn: { module: 'file:///no/such/module.js', name: 'f' }, args: [] } }, ['x'], /cannot import/],
      ['malformed task', { x: { fn: { module: '', name: 'f' } } }, ['x'], /fn must be/],
      ['unknown built-in', { x: { fn: { module: 'spillway:builtins', name: 'nope' }, args: [] } }, ['x'], /spillway:builtins has no function "nope"/],
    ];
    for (const [name, graph, wanted, message] of cases) {
      await assert.rejects(client.compute(graph, wanted), (err: unknown) => {
        assert.ok(err instanceof GraphError, `${name}: ${String(err)}`);
        assert.match(err.message, message, name);
        return true;
      });
    }
    assert.equal((await cluster.state()).tasks.total, before, 'no task was added');
  });

  await t.test('a wrong token is rejected with AuthError', async () => {
    await assert.rejects(Client.connect(cluster.address, { token: 'not-the-token' }), AuthError);
    await assert.rejects(Client.connect(cluster.address), AuthError);
  });

  await t.test("a client that disconnects has its kept keys released on the workers", async () => {
    const other = await Client.connect(cluster.address, { token: cluster.token });
    const graph: Graph = {};
    for (let i = 0; i < 4; i++) graph[`kept-${i}`] = { fn: fixture('fill'), args: [MiB / 8, i] };
    const values = await other.compute<Float64Array>(graph, Object.keys(graph), { keep: true });
    assert.deepEqual(values.map((v) => v[0]), [0, 1, 2, 3]);
    const held = async (): Promise<number> => (await cluster.state()).workers.reduce((n, w) => n + w.keys, 0);
    assert.ok((await held()) >= 4, 'the kept keys are on the workers');
    await other.close();
    await waitFor(async () => (await held()) === 0 && (await cluster.state()).tasks.total === 0, 'the keys to be released');
    await waitFor(async () => (await cluster.state()).workers.every((w) => w.lastHeartbeat !== null && w.lastHeartbeat.memory.count + w.lastHeartbeat.disk.count === 0), "the workers' stores to be empty");
  });
});
