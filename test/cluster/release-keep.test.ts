/** release() deferred while a compute waits for the key, then a compute with keep: true of the same key. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '../../src/client/client.js';
import { BUILTINS_MODULE, Methods } from '../../src/cluster/protocol.js';
import { type Channel, ControlServer } from '../../src/control/index.js';
import { SpillStore } from '../../src/index.js';
import { DataServer } from '../../src/transfer/server.js';

test('a compute with keep: true started after release() keeps its key, as it would had no compute been waiting', async (t) => {
  const data = await SpillStore.open({ memoryLimit: '64 MiB', monitorInterval: false });
  t.after(() => data.close());
  data.set('x', 42);
  const dataServer = await DataServer.listen(data, { host: '127.0.0.1' });
  t.after(() => dataServer.close());

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
