/** The supervisor with real processes: a worker killed -9 comes back; a task that eats memory gets its workers killed, then fails. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { Client } from '../../src/client/client.js';
import type { LocalCluster } from '../../src/client/local-cluster.js';
import type { Graph } from '../../src/cluster/protocol.js';
import { KilledWorkerError } from '../../src/errors.js';
import type { SchedulerState } from '../../src/scheduler/snapshot.js';
import { waitFor } from '../helpers/wait.js';
import { alive } from '../helpers/proc.js';
import { MiB, fixture, startCluster, warningLines } from './helpers.js';

test('a worker killed with SIGKILL is restarted: a new one registers within seconds and the job completes', async (t) => {
  const cluster = await startCluster(t, { workers: 2, memoryLimit: '256 MiB', nthreads: 1 });
  const client = await Client.connect(cluster.address, { token: cluster.token });
  t.after(() => client.close());
  const graph: Graph = {};
  for (let i = 0; i < 12; i++) graph[`x${i}`] = { fn: fixture('later'), args: [150, i] };
  graph.sum = { fn: fixture('identity'), args: [Array.from({ length: 12 }, (_, i) => ({ $ref: `x${i}` }))] };
  const computing = client.compute<number[]>(graph, ['sum']);
  const killed = cluster.workers[0];
  const killedAt = Date.now();
  await cluster.killWorker(0, 'SIGKILL');
  await cluster.supervisor.whenReady(0, 30_000);
  const back = Date.now() - killedAt;
  t.diagnostic(`the restarted worker registered ${back} ms after the kill`);
  assert.notEqual(cluster.workers[0], killed);
  assert.equal(alive(killed), false);
  assert.equal(cluster.supervisor.workers[0].restarts, 1);
  assert.deepEqual(await computing, [Array.from({ length: 12 }, (_, i) => i)]);
  await waitFor(async () => (await cluster.state()).workers.length === 2, 'both workers registered', 10_000);
  assert.equal(((await cluster.state()) as unknown as SchedulerState).counters.workersLost, 1);
  // The scheduler's kept log names the loss; what the test helper reports at the end.
  const lost = warningLines(cluster.schedulerStderrTail).map((line) => JSON.parse(line) as { msg: string; workerName?: string });
  assert.ok(lost.some((entry) => entry.msg === 'worker connection closed' && entry.workerName === 'local-0'), cluster.schedulerStderrTail);
  // A user scraping the scheduler sees the restart, by worker and reason (once the new worker's heartbeat is in).
  await waitFor(async () => restartSamples(await scrapeScheduler(cluster)).get('local-0/exit') === 1, 'the restart in the scheduler\'s /metrics', 15_000);
  const restarts = restartSamples(await scrapeScheduler(cluster));
  assert.deepEqual(Object.fromEntries(restarts), { 'local-0/exit': 1, 'local-0/memory': 0, 'local-1/exit': 0, 'local-1/memory': 0 });
});

test('a task allocating twice the memory limit: its workers are killed and restarted, then compute rejects with SPW_ERR_KILLED_WORKER; other tasks finish', async (t) => {
  const limit = 256 * MiB;
  // Heartbeats every second (a worker is removed after 5 s without one): faulting in the
  // hog's pages on a loaded machine can hold a worker's heartbeats up for more than the
  // tests' usual 1 s timeout.
  const cluster = await startCluster(t, { workers: 2, memoryLimit: limit, nthreads: 1, allowedFailures: 2, heartbeatIntervalMs: 1000 });
  const client = await Client.connect(cluster.address, { token: cluster.token });
  t.after(() => client.close());
  const others: Graph = {};
  for (let i = 0; i < 6; i++) others[`ok${i}`] = { fn: fixture('later'), args: [300, i] };
  const fine = client.compute<number>(others, Object.keys(others));
  const poisoned = client.compute({ poison: { fn: fixture('hog'), args: [2 * limit] }, after: { fn: fixture('identity'), args: [{ $ref: 'poison' }] } }, ['after']);
  const err = await poisoned.then(
    () => assert.fail('the poison task finished'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof KilledWorkerError, String(err));
  assert.equal(err.code, 'SPW_ERR_KILLED_WORKER');
  assert.equal(err.failedKey, 'poison');
  assert.match(err.worker ?? '', /^local-[01]$/);
  assert.match(err.message, /poison.*3 workers/);
  assert.deepEqual(await fine, [0, 1, 2, 3, 4, 5]);
  // Three deaths counted against the task failed it. A kill the scheduler does not count
  // (the task had already finished there, or the worker had been removed for missed
  // heartbeats and its task placed elsewhere) runs the task once more; the hog holding its
  // memory and the 1 s heartbeats make that rare, and the test allows two such kills.
  await waitFor(() => cluster.supervisor.memoryKills >= 3 && cluster.supervisor.restarts === cluster.supervisor.memoryKills, 'a restart after every kill', 30_000);
  const kills = cluster.supervisor.memoryKills;
  const state = (await cluster.state()) as unknown as SchedulerState;
  t.diagnostic(`${kills} memory kills, ${state.counters.workersLost} workers lost`);
  assert.ok(kills <= 5, `${kills} memory kills`);
  assert.equal(state.counters.tasksKilledWorkers, 1);
  // The kills are restarts with reason="memory", summed over the two slots.
  const memoryRestarts = async (): Promise<number> => [...restartSamples(await scrapeScheduler(cluster))].filter(([k]) => k.endsWith('/memory')).reduce((sum, [, n]) => sum + n, 0);
  await waitFor(async () => (await memoryRestarts()) === kills, `${kills} memory restarts in the scheduler's /metrics`, 15_000);
});

async function scrapeScheduler(cluster: LocalCluster): Promise<string> {
  assert.ok(cluster.httpAddress !== undefined, 'the scheduler serves HTTP');
  const res = await fetch(`${cluster.httpAddress}/metrics`);
  assert.equal(res.status, 200);
  return res.text();
}

/** `spillway_worker_restarts_total` by `worker/reason`. */
function restartSamples(text: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const family of parsePrometheusTextFormat(text)) {
    if (family.name !== 'spillway_worker_restarts_total') continue;
    for (const m of family.metrics) found.set(`${m.labels?.worker}/${m.labels?.reason}`, Number(m.value));
  }
  return found;
}
