/** Workers and clients keep trying to reach the scheduler, and a worker registers again (with its keys) after losing it. */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import { SchedulerUnreachableError } from '../../src/control/errors.js';
import { Scheduler } from '../../src/scheduler/index.js';
import { Worker } from '../../src/worker/index.js';
import type { WorkerHeartbeat } from '../../src/cluster/protocol.js';
import { PeerPool } from '../../src/shuffle/peer-pool.js';
import { recordLength, writeRecordHeader } from '../../src/shuffle/records.js';
import { PUSH_OP } from '../../src/shuffle/protocol.js';
import { waitFor } from '../helpers/wait.js';
import { FakeScheduler, fn } from './helpers.js';

const TOKEN = 'reconnect-token';

/**
 * A port that was free a moment ago (the scheduler binds it later). Taken below the
 * kernel's ephemeral range, where `listen(0)` never lands: another test's server, bound
 * meanwhile on a port of its own choosing, cannot take it and answer in its place.
 */
async function freePort(): Promise<number> {
  for (;;) {
    const candidate = 20_000 + Math.floor(Math.random() * 12_000);
    const server = net.createServer();
    const bound = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(candidate, '127.0.0.1', () => resolve(true));
    });
    if (!bound) continue;
    await new Promise((resolve) => server.close(resolve));
    return candidate;
  }
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

test('a worker that loses the scheduler drops every shuffle it held: the pieces in its store, the frame ids, the runs', async (t) => {
  const scheduler = await FakeScheduler.start();
  t.after(() => scheduler.close());
  const worker = await Worker.start({ scheduler: scheduler.address, memoryLimit: '32 MiB', nthreads: 1, monitorIntervalMs: false, schedulerConnectTimeoutMs: 10_000 });
  t.after(() => worker.close());
  // A peer pushes a piece as large as a chunk: it goes to the store at once.
  const peers = new PeerPool(undefined, undefined);
  t.after(() => peers.close());
  const piece = new Uint8Array(recordLength(600 * 1024));
  writeRecordHeader(piece, 0, { output: 0, input: 0, part: 0, parts: 1, length: 600 * 1024 });
  await peers.request(worker.address, { op: PUSH_OP, id: 's', run: 3, input: 0, seq: 0 }, piece);
  const lastBeat = (): WorkerHeartbeat | undefined => scheduler.heartbeats.at(-1)?.beat;
  await waitFor(() => lastBeat()?.shufflesHeld === 1 && lastBeat()?.memory.count === 1, 'the shuffle held');
  const [first] = scheduler.workers;
  const registered = once(worker, 'reconnected');
  first.channel.close();
  await registered;
  await waitFor(() => scheduler.heartbeats.at(-1)?.beat.workerId === worker.workerId && lastBeat()?.shufflesHeld === 0, 'the shuffle dropped');
  assert.equal(worker.store.size, 0, 'its piece deleted');
});
