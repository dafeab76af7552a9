/**
 * A frozen worker (SIGSTOP) holding inputs another worker must fetch: the scheduler
 * removes it, the fetches from it are abandoned, its keys are recomputed and the job
 * completes in a few heartbeat timeouts, not after the 60 s idle timeout (issue 33, item 1).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import { ref } from '../../src/cluster/protocol.js';
import { startCluster } from './helpers.js';
import { ext } from '../helpers/suite.js';

const fn = (name: string): { module: string; name: string } => ({ module: new URL(`./fixtures/faults${ext}`, import.meta.url).href, name });

interface State {
  workers: Array<{ pid: number; bytes: number }>;
  counters: { workersLost: number; tasksRecomputed: number };
}

test('a SIGSTOPped holder is removed and its inputs recomputed; the consumer finishes exactly', { timeout: 60_000 }, async (t) => {
  // Heartbeats every 200 ms: a worker silent for 1 s is removed.
  const cluster = await startCluster(t, { heartbeatIntervalMs: 200 });
  const client = await Client.connect(cluster.address, { token: cluster.token });
  t.after(() => client.close());
  const inputs: Record<string, { fn: { module: string; name: string }; args: unknown[] }> = {};
  let expected = 0;
  for (let i = 0; i < 6; i++) {
    const length = 20_000 * (i + 1);
    inputs[`part-${i}`] = { fn: fn('fill'), args: [length, i + 1] };
    expected += length * (i + 1);
  }
  // The inputs stay on the workers that computed them.
  await client.compute(inputs, Object.keys(inputs), { keep: true });
  const before = (await cluster.state()) as unknown as State;
  assert.equal(before.workers.length, 2);
  // Freeze the worker with fewer bytes: the consumer is placed on the other, which must fetch from it.
  const frozen = [...before.workers].sort((a, b) => a.bytes - b.bytes)[0];
  assert.ok(frozen.bytes > 0, 'both workers hold inputs');
  process.kill(frozen.pid, 'SIGSTOP');
  const started = Date.now();
  try {
    const [total] = await client.compute({ total: { fn: fn('totalAfter'), args: [0, ...Object.keys(inputs).map((key) => ref(key))] } }, ['total']);
    const seconds = (Date.now() - started) / 1000;
    assert.equal(total, expected);
    // Removal after 1 s of silence, then a recompute: far from the 60 s a frozen peer held a fetch for.
    assert.ok(seconds < 20, `the job took ${seconds} s after the freeze`);
    const after = (await cluster.state()) as unknown as State;
    assert.equal(after.counters.workersLost, 1);
    assert.ok(after.counters.tasksRecomputed >= 1, 'the frozen worker\'s inputs were recomputed');
  } finally {
    process.kill(frozen.pid, 'SIGCONT');
  }
});
