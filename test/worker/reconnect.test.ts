/** Workers and clients keep trying to reach the scheduler, and a worker registers again (with its keys) after losing it. */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import { SchedulerUnreachableError } from '../../src/control/errors.js';
import { Scheduler } from '../../src/scheduler/index.js';
import { Worker } from '../../src/worker/index.js';
import { fn } from './helpers.js';

const TOKEN = 'reconnect-token';

/** A port that was free a moment ago (the scheduler binds it later). */
async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

test('a worker started before its scheduler registers once it comes up; a client waits for it too', async (t) => {
  const port = await freePort();
  const starting = Worker.start({ scheduler: { host: '127.0.0.1', port }, token: TOKEN, memoryLimit: '32 MiB', nthreads: 1, monitorIntervalMs: false, schedulerConnectTimeoutMs: 30_000 });
  const connecting = Client.connect(`127.0.0.1:${port}`, { token: TOKEN, connectTimeoutMs: 30_000 });
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const scheduler = await Scheduler.start({ port, token: TOKEN, heartbeatIntervalMs: 200 });
  t.after(() => scheduler.close());
  const worker = await starting;
  t.after(() => worker.close());
  const client = await connecting;
  t.after(() => client.close());
  assert.deepEqual(await client.compute({ x: fn('add', 2, 3) }, ['x']), [5]);
});

test('a scheduler that never comes up: SchedulerUnreachableError after connectTimeoutMs, nothing left behind', async () => {
  const port = await freePort();
  const started = Date.now();
  await assert.rejects(Worker.start({ scheduler: { host: '127.0.0.1', port }, memoryLimit: '32 MiB', nthreads: 1, schedulerConnectTimeoutMs: 700 }), (err: unknown) => {
    assert.ok(err instanceof SchedulerUnreachableError, String(err));
    assert.equal(err.code, 'SPW_ERR_SCHEDULER_UNREACHABLE');
    assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${port} within 700 ms.*ECONNREFUSED`));
    return true;
  });
  assert.ok(Date.now() - started >= 600, 'it kept trying');
  await assert.rejects(Client.connect(`127.0.0.1:${port}`, { connectTimeoutMs: 300 }), SchedulerUnreachableError);
});

test('after a scheduler restart the worker registers again, reporting the keys it holds; the new scheduler releases them', async (t) => {
  const first = await Scheduler.start({ token: TOKEN, heartbeatIntervalMs: 200 });
  const port = first.address.port;
  const worker = await Worker.start({ scheduler: first.address, token: TOKEN, memoryLimit: '32 MiB', nthreads: 1, monitorIntervalMs: false, schedulerConnectTimeoutMs: 30_000 });
  t.after(() => worker.close());
  const client = await Client.connect(first.address, { token: TOKEN });
  assert.deepEqual(await client.compute({ kept: fn('add', 1, 1) }, ['kept'], { keep: true }), [2]);
  assert.equal(worker.store.has('kept'), true);
  const oldId = worker.workerId;
  const disconnected = once(worker, 'disconnected');
  // The client stays until the scheduler is gone: leaving first would release its kept key.
  await first.close();
  await client.close();
  await disconnected;
  const reconnected = once(worker, 'reconnected');
  const second = await Scheduler.start({ port, token: TOKEN, heartbeatIntervalMs: 200 });
  t.after(() => second.close());
  const [info] = (await reconnected) as [{ workerId: string; memoryKeys: number; spilledKeys: number }];
  assert.equal(info.memoryKeys + info.spilledKeys, 1, JSON.stringify(info));
  assert.equal(worker.workerId, info.workerId);
  assert.notEqual(worker.closed, true);
  assert.equal(second.state().workers.length, 1);
  assert.ok(oldId !== undefined);
  // The new scheduler does not know the key: it is released on the worker.
  const deadline = Date.now() + 10_000;
  while (worker.store.has('kept') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(worker.store.has('kept'), false, 'the unknown key was released');
  const again = await Client.connect(second.address, { token: TOKEN });
  t.after(() => again.close());
  assert.deepEqual(await again.compute({ y: fn('add', 20, 22) }, ['y']), [42]);
});
