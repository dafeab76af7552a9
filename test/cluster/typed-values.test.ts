/**
 * Values of registered types made by tasks (an Apache Arrow table, a user class): kept by the
 * worker, spilled, sent to a peer, and decoded as themselves by another task on another
 * worker and by the client (issue 31).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as arrow from 'apache-arrow';
import { Client } from '../../src/client/client.js';
import { ref } from '../../src/cluster/protocol.js';
import { registerArrow } from '../../src/index.js';
import { Series } from './fixtures/typed.js';
import { startCluster } from './helpers.js';
import { ext } from '../helpers/suite.js';

registerArrow(arrow);

const fn = (name: string): { module: string; name: string } => ({ module: new URL(`./fixtures/typed${ext}`, import.meta.url).href, name });

test('Arrow tables and registered class instances cross threads, disk and peers as themselves', { timeout: 120_000 }, async (t) => {
  const cluster = await startCluster(t, { workers: 2, nthreads: 1, memoryLimit: '8 MiB' });
  const client = await Client.connect(cluster.address, { token: cluster.token });
  t.after(() => client.close());
  const parts = 16;
  const rows = 65_536; // 1 MiB of columns per table, with 256 KiB of samples: 20 MiB in all, more than both workers hold
  const samples = 32_768;
  const graph: Record<string, { fn: { module: string; name: string }; args: unknown[] }> = {};
  for (let i = 0; i < parts; i++) graph[`part-${i}`] = { fn: fn('makePart'), args: [i, rows, samples] };
  const keys = Object.keys(graph);
  // Four summaries of four parts each (i ≡ j mod 4): 5 MiB of inputs, which fit a worker.
  const groups = [0, 1, 2, 3].map((j) => keys.filter((_, i) => i % 4 === j));
  groups.forEach((group, j) => (graph[`summary-${j}`] = { fn: fn('summarize'), args: group.map((k) => ref(k)) }));
  // The parts are kept for the second graph below.
  const results = await client.compute(graph, ['summary-0', 'summary-1', 'summary-2', 'summary-3', ...keys], { keep: true });
  const summaries = results.slice(0, 4) as Summary[];
  const made = results.slice(4) as { table: arrow.Table; series: Series; pid: number }[];
  const first = made[0]!;

  let cycle = 0;
  for (let r = 0; r < rows; r++) cycle += r % 7;
  const expectTable = (i: number): number => rows * i + cycle;
  summaries.forEach((summary, j) => {
    const parts = [j, j + 4, j + 8, j + 12];
    assert.deepEqual(summary.tables, parts.map(expectTable));
    assert.deepEqual(summary.series, parts.map((i) => i * samples));
    assert.deepEqual(summary.labels, parts.map((i) => `part-${i}`));
  });

  // The scheduler places each summary where its inputs are, so none may have had to cross.
  // A summary of two parts held on different workers does: one of them is sent by a peer.
  // The scheduler spreads the parts over both workers, but on a loaded CI host every part
  // one worker made was once held by the other as well (made a second time there), so no two
  // were apart; fresh parts are then made, a pair at a time, until two are.
  const index = new Map(keys.map((key, i) => [key, i]));
  let pair = await heldApart(client, [...index.keys()]);
  for (let round = 0; pair === undefined && round < 5; round++) {
    const fresh = [parts + 2 * round, parts + 2 * round + 1];
    const extra = Object.fromEntries(fresh.map((i) => [`part-${i}`, { fn: fn('makePart'), args: [i, rows, samples] }]));
    await client.compute(extra, Object.keys(extra), { keep: true });
    for (const i of fresh) index.set(`part-${i}`, i);
    pair = await heldApart(client, [...index.keys()]);
  }
  assert.ok(pair !== undefined, `two parts are held on different workers (${JSON.stringify(await client.whoHas([...index.keys()]))})`);
  const [one, other] = pair.map((key) => index.get(key)!);
  const [crossed] = (await client.compute({ crossed: { fn: fn('summarize'), args: [ref(`part-${one}`), ref(`part-${other}`)] } }, ['crossed'])) as Summary[];
  assert.deepEqual(crossed!.tables, [expectTable(one!), expectTable(other!)]);
  assert.deepEqual(crossed!.labels, [`part-${one}`, `part-${other}`]);
  assert.ok(crossed!.madeOn.some((pid) => pid !== crossed!.usedOn), `an input crossed between workers (${JSON.stringify(crossed)})`);
  await client.release([...index.keys()]);

  // The client decodes both types as themselves.
  assert.ok(first.table instanceof arrow.Table, 'the client gets an Arrow Table');
  assert.equal(first.table.numRows, rows);
  assert.deepEqual([...first.table.getChild('id')!.toArray().subarray(0, 3)], [0, 1, 2]);
  assert.ok(first.series instanceof Series, 'the client gets a Series');
  assert.equal(first.series.label, 'part-0');
  assert.equal(first.series.samples.length, samples);

  // The workers spilled and served values to each other (heartbeats carry the counters).
  const deadline = Date.now() + 20_000;
  let spilled = 0;
  let served = 0;
  while (Date.now() < deadline) {
    const state = (await cluster.state()) as unknown as { workers: { lastHeartbeat: { spilledBytes: number; servedFromDiskBytes: number; servedFromMemoryBytes: number } | null }[] };
    spilled = state.workers.reduce((sum, w) => sum + (w.lastHeartbeat?.spilledBytes ?? 0), 0);
    served = state.workers.reduce((sum, w) => sum + (w.lastHeartbeat?.servedFromDiskBytes ?? 0) + (w.lastHeartbeat?.servedFromMemoryBytes ?? 0), 0);
    if (spilled > 0 && served > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.ok(spilled > 0, 'the workers spilled typed values');
  assert.ok(served > 0, 'the workers sent typed values to each other');
});

/** Two of `keys` whose holders (where the scheduler knows them to be) share no worker. */
async function heldApart(client: Client, keys: string[]): Promise<[string, string] | undefined> {
  const holders = await client.whoHas(keys);
  const at = (key: string): string[] => (holders[key] ?? []).map((a) => `${a.host}:${a.port}`);
  for (const [i, one] of keys.entries()) {
    for (const other of keys.slice(i + 1)) {
      if (at(one).length > 0 && at(other).length > 0 && at(other).every((a) => !at(one).includes(a))) return [one, other];
    }
  }
  return undefined;
}

interface Summary {
  tables: number[];
  series: number[];
  labels: string[];
  madeOn: number[];
  usedOn: number;
}
