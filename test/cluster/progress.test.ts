/** compute()'s onProgress on a real cluster: the scheduler's count of the client's tasks. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, type ComputeProgress } from '../../src/client/client.js';
import { BUILTINS_MODULE, Methods, ref, type Graph } from '../../src/cluster/protocol.js';
import { type Channel, ControlServer } from '../../src/control/index.js';
import { InvalidArgumentError } from '../../src/errors.js';
import { fixture, holderOfX, startCluster } from './helpers.js';

test('onProgress on a real cluster', async (t) => {
  const cluster = await startCluster(t);
  const client = await Client.connect(cluster.address, { token: cluster.token });
  t.after(() => client.close());
  // Eight tasks of 150 ms, then one that sums them: over a second on two workers.
  const graph: Graph = { total: { fn: fixture('add'), args: [0, 0] } };
  for (let i = 0; i < 8; i++) graph[`s${i}`] = { fn: fixture('sleep'), args: [150] };
  graph.sum = { fn: fixture('add'), args: [ref('s0'), ref('s1')] };

  await t.test('reports task counts while computing, and every task done at the end', async () => {
    const reports: ComputeProgress[] = [];
    const [sum] = await client.compute<number>(graph, ['sum', ...Object.keys(graph).filter((k) => k.startsWith('s'))], {
      onProgress: (p) => reports.push(structuredClone(p)),
      progressIntervalMs: 20,
    });
    assert.equal(sum, 300);
    const counted = reports.filter((r) => r.tasks !== undefined);
    assert.ok(counted.length >= 3, `${counted.length} reports with task counts`);
    // 'total' is in the graph but nothing needs it: the scheduler forgot it at once.
    assert.ok(counted.every((r) => r.tasks?.total === 9 && r.tasks.erred === 0), JSON.stringify(counted.map((r) => r.tasks)));
    const done = counted.map((r) => r.tasks?.done ?? 0);
    assert.deepEqual([...done].sort((a, b) => a - b), done, 'done never goes back');
    assert.ok(done[0] < 9, `the first count (${done[0]} done) came while tasks ran`);
    assert.deepEqual(reports.at(-1), { ready: 9, wanted: 9, tasks: { done: 9, erred: 0, total: 9 } });
  });

  await t.test('an onProgress that throws rejects compute with its error; the client goes on', async () => {
    const oops = new Error('the progress bar broke');
    await assert.rejects(
      client.compute({ x: { fn: fixture('sleep'), args: [100] } }, ['x'], {
        onProgress: () => {
          throw oops;
        },
        progressIntervalMs: 10,
      }),
      (e: unknown) => e === oops,
    );
    assert.deepEqual(await client.compute({ y: { fn: fixture('add'), args: [1, 2] } }, ['y']), [3]);
  });

  await t.test('a progressIntervalMs that is not a number of milliseconds is refused', async () => {
    for (const bad of [0, -5, Number.NaN, 2 ** 31, '100' as unknown as number]) {
      await assert.rejects(client.compute(graph, ['sum'], { onProgress: () => undefined, progressIntervalMs: bad }), InvalidArgumentError);
    }
  });
});

test('a progress request that fails skips one report, not the rest of the computation', async (t) => {
  const dataServer = await holderOfX(t);
  const server = await ControlServer.listen({});
  t.after(() => server.close());
  let asked = 0;
  let remote: Channel | undefined;
  server.on('channel', (channel: Channel) => {
    remote = channel;
    channel.handle(Methods.registerClient, () => ({ clientId: 'c1' }));
    channel.handle(Methods.submit, () => ({ added: 1 }));
    channel.handle(Methods.release, () => null);
    channel.handle(Methods.progress, () => {
      // The first answer is an error, as a timed-out request would be.
      if (++asked === 1) throw new Error('scheduler busy');
      return { done: 0, erred: 0, total: 1 };
    });
  });
  const client = await Client.connect(server.address);
  t.after(() => client.close());
  const counted: ComputeProgress[] = [];
  const graph = { x: { fn: { module: BUILTINS_MODULE, name: 'getitem' }, args: [[1], 0] } };
  const computing = client.compute(graph, ['x'], { onProgress: (p) => p.tasks !== undefined && counted.push(structuredClone(p)), progressIntervalMs: 10 });
  const deadline = Date.now() + 10_000;
  while (counted.length < 2 && Date.now() < deadline) await sleep(5);
  assert.ok(counted.length >= 2, `${counted.length} reports with task counts after ${asked} requests`);
  remote!.notify(Methods.keyReady, { key: 'x', holders: [dataServer.address], size: 8 });
  assert.deepEqual(await computing, [42]);
  assert.ok(asked >= 3, `${asked} progress requests`);
});
