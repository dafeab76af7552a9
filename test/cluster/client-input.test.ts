/** What a client sends and gets back on a real cluster: each mistake settles with a typed error, never hangs or is silently wrong. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import { type Graph } from '../../src/cluster/protocol.js';
import { GraphError, SpillwayError, TaskError } from '../../src/errors.js';
import { fixture, startCluster } from './helpers.js';


/** Settles `p` or reports it still pending after `ms`. */
function within<T>(p: Promise<T>, ms: number): Promise<{ value: T } | { error: unknown } | 'pending'> {
  return Promise.race([
    p.then((value) => ({ value }), (error: unknown) => ({ error })),
    new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), ms).unref()),
  ]);
}

test('client input and results on a real cluster', async (t) => {
  const cluster = await startCluster(t, { workers: 1, nthreads: 2 });
  const client = await Client.connect(cluster.address, { token: cluster.token });
  t.after(() => client.close());

  await t.test('release() of a key a compute() is still waiting for does not leave that compute pending forever', async () => {
    const computing = client.compute({ slow: { fn: fixture('later'), args: [300, 'done'] } }, ['slow']);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await client.release(['slow']);
    const settled = await within(computing, 5000);
    assert.notEqual(settled, 'pending', 'compute() never settled after release()');
    assert.deepEqual(settled, { value: ['done'] });
    // ...and the key is released on the cluster once that compute is over.
    assert.equal((await cluster.state()).tasks.total, 0);
  });

  await t.test('a task whose result cannot leave its thread (a function, a symbol) fails with a message that says so', async () => {
    for (const name of ['returnsFunction', 'returnsSymbol']) {
      const err = await client.compute({ r: { fn: fixture(name), args: [] } }, ['r']).then(
        () => assert.fail('compute should reject'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof TaskError, String(err));
      assert.doesNotMatch(err.message, /\[object Object\]/, `${name}: the message names the problem`);
      assert.match(err.message, /result/i, name);
      assert.equal(err.remoteCode, 'SPW_ERR_CODEC', name);
    }
  });

  await t.test('arguments msgpack cannot carry are refused with GraphError before anything runs', async () => {
    const cases: Array<[string, unknown]> = [
      ['a symbol', Symbol('s')],
      ['a function', () => 1],
      ['a Map (would arrive as a plain object with string keys)', new Map([[1, 'one']])],
      ['a symbol nested in an object', { deep: [Symbol('s')] }],
      ['an own "__proto__" property (msgpack renames it "__proto_")', JSON.parse('{"__proto__": 1, "x": 2}')],
    ];
    for (const [what, arg] of cases) {
      const graph = { x: { fn: fixture('identity'), args: [arg] } } as unknown as Graph;
      const err = await client.compute(graph, ['x']).then(
        (v) => ({ value: v }),
        (e: unknown) => e,
      );
      assert.ok(err instanceof GraphError, `${what}: ${err instanceof Error ? `${err.constructor.name}: ${err.message}` : JSON.stringify(err, (_, v: unknown) => (typeof v === 'function' ? 'fn' : v))}`);
      assert.ok(err instanceof SpillwayError && err.code === 'SPW_ERR_GRAPH');
    }
    // A key "__proto__" would reach the scheduler as "__proto_".
    const proto = JSON.parse('{"__proto__": {"args": [1]}}') as Graph;
    proto.__proto__.fn = fixture('identity');
    await assert.rejects(client.compute(proto, ['__proto__']), (e: unknown) => e instanceof GraphError && /__proto__/.test(e.message));
    // Plain data still goes through.
    const [same] = await client.compute<unknown>({ y: { fn: fixture('identity'), args: [{ n: 1, d: new Date(5), b: 10n, f: new Float64Array([1, 2]) }] } }, ['y']);
    assert.deepEqual(same, { n: 1, d: new Date(5), b: 10n, f: new Float64Array([1, 2]) });
  });
});
