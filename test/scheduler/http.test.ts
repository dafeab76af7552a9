import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Methods } from '../../src/cluster/protocol.js';
import { FakeClient, FakeWorker, startScheduler, task } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

async function get(address: { host: string; port: number } | undefined, path: string): Promise<{ status: number; type: string; body: string }> {
  assert.ok(address !== undefined);
  const res = await fetch(`http://${address.host}:${address.port}${path}`);
  return { status: res.status, type: res.headers.get('content-type') ?? '', body: await res.text() };
}

test('GET /metrics and /api/state over real HTTP; 404 otherwise', async (t) => {
  // Heartbeats every 20 ms, but a worker is lost only when its connection drops: on a loaded
  // machine the default timeout (5 heartbeats, 100 ms) dropped alpha between the wait and the
  // scrape (CI once; 1 run in 15 with three CPU burners alongside, none in 40 with this).
  const scheduler = await startScheduler(t, { httpPort: 0, heartbeatIntervalMs: 20, workerTimeoutMs: 60_000 });
  const b = await FakeWorker.connect(t, scheduler, { auto: false, name: 'beta' });
  const client = await FakeClient.connect(t, scheduler);
  await client.submit({ x: task(), y: task('x'), z: task() }, ['y', 'z']);
  await waitFor(() => b.computes.length === 2, 'x and z sent');
  b.fail('z', 'nope');
  b.finish('x');
  await waitFor(() => b.computes.length === 3, 'y sent');
  b.finish('y');
  await client.waitReady(['y']);
  const a = await FakeWorker.connect(t, scheduler, { name: 'alpha' });
  await waitFor(() => client.erred.has('z') && scheduler.state().workers.every((w) => w.lastHeartbeat !== null), 'z erred, heartbeats in');
  // beta leaves with y: alpha computes x and y again.
  b.close();
  // The fake worker holds y before the scheduler has read its task-finished message: wait for the scheduler.
  await waitFor(() => scheduler.state().workers.length === 1 && scheduler.state().counters.tasksFinished === 4, 'y recomputed on alpha');
  assert.ok(a.store.has('y'));
  const metrics = await get(scheduler.httpAddress, '/metrics');
  assert.equal(metrics.status, 200);
  assert.match(metrics.type, /text\/plain/);
  const line = (re: RegExp): number => {
    const found = metrics.body.split('\n').find((l) => re.test(l));
    assert.ok(found !== undefined, `no line ${re}`);
    return Number(found.split(' ').at(-1));
  };
  assert.equal(line(/^spillway_scheduler_workers /), 1);
  assert.equal(line(/^spillway_scheduler_clients /), 1);
  assert.equal(line(/^spillway_scheduler_tasks\{state="memory"\}/), 1);
  assert.equal(line(/^spillway_scheduler_tasks\{state="erred"\}/), 1);
  assert.equal(line(/^spillway_scheduler_keys_in_memory /), 1);
  assert.equal(line(/^spillway_scheduler_paused_workers /), 0);
  // Per worker, labelled by its name: RSS split into parts that add up to it.
  const rss = line(/^spillway_worker_rss_bytes\{worker="alpha"\}/);
  const managed = line(/^spillway_worker_memory_bytes\{worker="alpha",type="managed"\}/);
  assert.equal(rss, managed + 1000);
  assert.equal(line(/^spillway_worker_memory_bytes\{worker="alpha",type="unmanaged"\}/), 1000);
  assert.equal(line(/^spillway_worker_memory_bytes\{worker="alpha",type="pinned"\}/), 0);
  assert.equal(line(/^spillway_scheduler_worker_processing\{worker="alpha"\}/), 0);
  assert.ok(!metrics.body.includes('worker="beta"'), 'departed workers drop out');
  assert.ok(!/worker="w-\d+"/.test(metrics.body), 'workers are labelled by name, not by a numbered id');
  assert.equal(line(/^spillway_scheduler_tasks_finished_total /), 4);
  assert.equal(line(/^spillway_scheduler_tasks_erred_total /), 1);
  assert.equal(line(/^spillway_scheduler_workers_lost_total /), 1);
  assert.equal(line(/^spillway_scheduler_tasks_recomputed_total /), 2);
  // Counters do not count twice on a second scrape.
  const again = await get(scheduler.httpAddress, '/metrics');
  assert.match(again.body, /^spillway_scheduler_tasks_erred_total 1$/m);

  const state = await get(scheduler.httpAddress, '/api/state');
  assert.equal(state.status, 200);
  assert.match(state.type, /application\/json/);
  const json = JSON.parse(state.body) as ReturnType<typeof scheduler.state>;
  assert.deepEqual(json.address, scheduler.address);
  assert.equal(json.workers.length, 1);
  assert.equal(json.workers[0].name, 'alpha');
  assert.equal(json.workers[0].lastHeartbeat?.disk.bytes, 7);
  const ago = json.workers[0].lastHeartbeatMsAgo;
  assert.ok(ago !== null && ago >= 0 && ago < 60_000, `last heartbeat ${ago} ms ago`);
  assert.equal(json.tasks.memory, 1);
  assert.equal(json.tasks.erred, 1);
  assert.equal(json.clients.length, 1);
  assert.equal(json.clients[0].wanted, 2);
  assert.equal(json.counters.workersLost, 1);

  assert.equal((await get(scheduler.httpAddress, '/nope')).status, 404);
  assert.equal((await get(scheduler.httpAddress, '/')).status, 404);
});

test('without httpPort there is no HTTP endpoint', async (t) => {
  const scheduler = await startScheduler(t);
  assert.equal(scheduler.httpAddress, undefined);
  assert.equal(scheduler.state().httpAddress, null);
});

test('a heartbeat carrying a 64-bit integer (a BigInt once decoded) does not take /api/state, or the scheduler, down', async (t) => {
  const scheduler = await startScheduler(t, { httpPort: 0, heartbeatIntervalMs: 60_000 });
  const w = await FakeWorker.connect(t, scheduler, { heartbeats: false });
  assert.equal(scheduler.state().workers[0].lastHeartbeatMsAgo, null, 'no heartbeat yet');
  w.channel.notify(Methods.heartbeat, { ...w.heartbeatPayload(), rss: 2n ** 63n });
  await waitFor(() => scheduler.state().workers[0]?.lastHeartbeat !== null, 'heartbeat in');
  const state = await get(scheduler.httpAddress, '/api/state');
  assert.equal(state.status, 200);
  JSON.parse(state.body);
  assert.equal((await get(scheduler.httpAddress, '/metrics')).status, 200);
});
