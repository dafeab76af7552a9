import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { Graph } from '../../src/cluster/protocol.js';
import { Scheduler } from '../../src/scheduler/index.js';
import { type Cleanup, FakeClient, FakeWorker, TOKEN, sleep, task } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

interface Scenario {
  deps: number[][];
  wanted: boolean[];
  /** Kill worker `victim` once `after` results have been reported (cluster-wide). */
  deaths: Array<{ after: number; victim: number }>;
  seed: number;
}

const scenario: fc.Arbitrary<Scenario> = fc.integer({ min: 1, max: 200 }).chain((n) =>
  fc.record({
    deps: fc.array(fc.array(fc.nat(), { maxLength: 3 }), { minLength: n, maxLength: n }),
    wanted: fc.array(fc.boolean(), { minLength: n, maxLength: n }),
    deaths: fc.array(fc.record({ after: fc.nat({ max: n }), victim: fc.nat({ max: 2 }) }), { maxLength: 2 }),
    seed: fc.integer(),
  }),
);

function buildGraph(s: Scenario): { graph: Graph; wanted: string[] } {
  const graph: Graph = {};
  s.deps.forEach((picks, i) => {
    const deps = i === 0 ? [] : [...new Set(picks.map((d) => `t${d % i}`))];
    graph[`t${i}`] = task(...deps);
  });
  const wanted = Object.keys(graph).filter((_, i) => s.wanted[i]);
  return { graph, wanted: wanted.length > 0 ? wanted : [`t${s.deps.length - 1}`] };
}

/** The keys the wanted ones need, wanted included. */
function needed(graph: Graph, wanted: string[]): Set<string> {
  const seen = new Set<string>();
  const stack = [...wanted];
  for (let key = stack.pop(); key !== undefined; key = stack.pop()) {
    if (seen.has(key)) continue;
    seen.add(key);
    for (const arg of graph[key].args ?? []) stack.push((arg as { $ref: string }).$ref);
  }
  return seen;
}

async function run(s: Scenario): Promise<void> {
  const cleanups: Array<() => unknown> = [];
  const ctx: Cleanup = { after: (fn) => cleanups.push(fn) };
  const scheduler = await Scheduler.start({ token: TOKEN });
  try {
    let state = s.seed >>> 0;
    const random = (): number => {
      state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
      return state / 2 ** 32;
    };
    const workers = await Promise.all([0, 1, 2].map(() => FakeWorker.connect(ctx, scheduler, { delayMs: () => Math.floor(random() * 3) })));
    const client = await FakeClient.connect(ctx, scheduler);
    const { graph, wanted } = buildGraph(s);
    await client.submit(graph, wanted);
    const deaths = [...s.deaths].sort((a, b) => a.after - b.after);
    let killed = 0;
    const deadline = Date.now() + 4000;
    while (!wanted.every((k) => client.ready.has(k))) {
      assert.ok(Date.now() < deadline, `graph did not complete: ${JSON.stringify(scheduler.state().tasks)}`);
      assert.equal(client.erred.size, 0);
      const total = workers.reduce((sum, w) => sum + w.finished, 0);
      while (deaths.length > 0 && deaths[0].after <= total) {
        const victim = workers[deaths.shift()?.victim ?? 0];
        // Keep one worker alive.
        if (!victim.closed && workers.filter((w) => !w.closed).length > 1) {
          victim.close();
          killed++;
        }
      }
      await sleep(1);
    }
    // The last key-ready may predate a death: wait until every wanted key sits on a live worker.
    await waitFor(() => wanted.every((k) => {
      const holders = client.ready.get(k)?.holders ?? [];
      return holders.length > 0 && holders.every((h) => workers.some((w) => !w.closed && w.data.port === h.port && w.store.has(k)));
    }), 'wanted keys on live workers');
    const live = workers.filter((w) => !w.closed);
    const where = await client.whoHas(wanted);
    for (const key of wanted) {
      assert.equal(where[key].length, 1, `${key} held once`);
      assert.ok(live.some((w) => w.data.port === where[key][0].port && w.store.has(key)));
    }
    for (const w of workers) assert.deepEqual(w.violations, []);
    const counts = new Map<string, number>();
    for (const w of workers) for (const key of w.finishedKeys) counts.set(key, (counts.get(key) ?? 0) + 1);
    const need = needed(graph, wanted);
    for (const [key, count] of counts) {
      assert.ok(need.has(key), `${key} was computed but nobody needed it`);
      if (killed === 0) assert.equal(count, 1, `${key} computed ${count} times without a worker death`);
      else assert.ok(count <= 1 + killed, `${key} computed ${count} times with ${killed} deaths`);
    }
    if (killed === 0) for (const key of wanted) assert.equal(client.readyCount.get(key), 1);
    // Everything is released at the end: no leak on any worker, nothing left at the scheduler.
    await client.release(wanted);
    await waitFor(() => live.every((w) => w.store.size === 0) && scheduler.state().tasks.total === 0, 'all released');
  } finally {
    for (const fn of cleanups) await fn();
    await scheduler.close();
  }
}

test('random DAGs with random worker deaths complete; nothing needed is released, nothing is leaked', async () => {
  await fc.assert(fc.asyncProperty(scenario, run), {
    numRuns: Number(process.env.SPW_PROP_RUNS ?? 40),
    timeout: 8000,
    // A failing run can take seconds: bound the shrinking too.
    interruptAfterTimeLimit: 40_000,
    markInterruptAsFailure: true,
  });
});
