import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import { BUILTINS_MODULE, type Graph, Methods } from '../../src/cluster/protocol.js';
import { Channel, ControlServer } from '../../src/control/index.js';
import { GraphError, TaskError } from '../../src/errors.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { fixture, holderOfX, startCluster } from './helpers.js';

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

/**
 * Two computations of one client share key x. The first finishes while the second is in
 * flight (so it leaves x to the second), then the scheduler refuses the second's graph:
 * x was wanted by the first's (accepted) submit and must still be released.
 */
test('a key left to a computation whose graph is then refused is still released', async (t) => {
  const dataServer = await holderOfX(t);

  const server = await ControlServer.listen({});
  t.after(() => server.close());
  const released: string[][] = [];
  const submits: { wanted: string[]; answer: (err?: Error) => void }[] = [];
  let remote: Channel | undefined;
  server.on('channel', (channel: Channel) => {
    remote = channel;
    channel.handle(Methods.registerClient, () => ({ clientId: 'c1' }));
    channel.handle(
      Methods.submit,
      (p) =>
        new Promise((resolve, reject) => {
          submits.push({ wanted: (p as { wanted: string[] }).wanted, answer: (err) => (err === undefined ? resolve({ added: 1 }) : reject(err)) });
        }),
    );
    channel.handle(Methods.release, (p) => {
      released.push((p as { keys: string[] }).keys);
      return null;
    });
  });

  const client = await Client.connect(server.address);
  t.after(() => client.close());
  const fn = { module: BUILTINS_MODULE, name: 'getitem' };
  const a = client.compute({ x: { fn, args: [[1], 0] } }, ['x']);
  while (submits.length < 1) await sleep(5);
  submits[0].answer();
  const b = client.compute({ x: { fn, args: [[1], 0] }, y: { fn, args: [[1], 0] } }, ['x', 'y']);
  while (submits.length < 2) await sleep(5);
  // x is ready: the first computation finishes (and leaves x to the second, still submitting).
  remote!.notify(Methods.keyReady, { key: 'x', holders: [dataServer.address], size: 8 });
  assert.deepEqual(await a, [42]);
  // Now the scheduler refuses the second graph.
  submits[1].answer(new GraphError('graph has a cycle'));
  await assert.rejects(b, GraphError);
  await sleep(100);
  assert.deepEqual(released.flat(), ['x'], 'x, wanted by the accepted submit, is released');
});

/** release() is deferred while a compute waits for the key; a compute with keep: true asked after it wins. */
test('a compute with keep: true started after release() keeps its key, as it would had no compute been waiting', async (t) => {
  const dataServer = await holderOfX(t);

  const server = await ControlServer.listen({});
  t.after(() => server.close());
  const released: string[] = [];
  let submits = 0;
  let remote: Channel | undefined;
  server.on('channel', (channel: Channel) => {
    remote = channel;
    channel.handle(Methods.registerClient, () => ({ clientId: 'c1' }));
    channel.handle(Methods.submit, () => {
      submits++;
      return { added: 1 };
    });
    channel.handle(Methods.release, (p) => {
      released.push(...(p as { keys: string[] }).keys);
      return null;
    });
  });

  const client = await Client.connect(server.address);
  t.after(() => client.close());
  const graph = { x: { fn: { module: BUILTINS_MODULE, name: 'getitem' }, args: [[1], 0] } };
  const a = client.compute(graph, ['x']);
  while (submits < 1) await sleep(5);
  // The user is done with x (a still waits for it, so this is deferred)...
  await client.release(['x']);
  // ...then asks for it again, to keep it on the cluster.
  const b = client.compute(graph, ['x'], { keep: true });
  while (submits < 2) await sleep(5);
  remote!.notify(Methods.keyReady, { key: 'x', holders: [dataServer.address], size: 8 });
  assert.deepEqual(await a, [42]);
  assert.deepEqual(await b, [42]);
  await sleep(100);
  assert.deepEqual(released, [], 'x, kept by the later compute, is not released');
});
