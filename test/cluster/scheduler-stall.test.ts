/** A scheduler that stalls longer than the worker timeout keeps its workers, and the job completes (issue 33, item 2). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import { ref } from '../../src/cluster/protocol.js';
import { startCluster } from './helpers.js';
import { ext } from '../helpers/suite.js';

const fn = (name: string): { module: string; name: string } => ({ module: new URL(`./fixtures/faults${ext}`, import.meta.url).href, name });
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

test('a scheduler stopped for 3 s (worker timeout 1 s) removes no worker; the job completes exactly', { timeout: 60_000 }, async (t) => {
  // Heartbeats every 200 ms: a worker silent for 1 s is removed.
  const cluster = await startCluster(t, { heartbeatIntervalMs: 200 });
  const client = await Client.connect(cluster.address, { token: cluster.token });
  t.after(() => client.close());
  const graph: Record<string, { fn: { module: string; name: string }; args: unknown[] }> = {};
  for (let i = 0; i < 4; i++) graph[`slow-${i}`] = { fn: fn('later'), args: [1000, i + 1] };
  graph.total = { fn: fn('sum'), args: Object.keys(graph).map((key) => ref(key)) };
  const pending = client.compute(graph, ['total']);
  await sleep(300);
  process.kill(cluster.schedulerPid, 'SIGSTOP');
  let stopped = true;
  t.after(() => {
    if (stopped) process.kill(cluster.schedulerPid, 'SIGCONT');
  });
  await sleep(3000);
  process.kill(cluster.schedulerPid, 'SIGCONT');
  stopped = false;
  const [total] = await pending;
  assert.equal(total, 10);
  const state = (await cluster.state()) as unknown as { workers: unknown[]; counters: { workersLost: number } };
  assert.equal(state.counters.workersLost, 0);
  assert.equal(state.workers.length, 2);
});
