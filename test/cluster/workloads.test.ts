/** The built-in workloads run in this process (no cluster): their graphs are sound and their checks are exact. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dependencies, substitute, type Graph } from '../../src/cluster/protocol.js';
import { builtinFunction } from '../../src/worker/builtins.js';
import { planWorkload } from '../../src/workloads/index.js';
import { concat, split, summarize } from '../../src/workloads/shuffle.js';
import fc from 'fast-check';

/**
 * Evaluates a graph depth first, as a worker would, importing each function by reference
 * (so shuffles here are task-based: the p2p method runs as a service on real workers,
 * tested in workloads-e2e and test/shuffle);
 * `alter` may change a task's output on its way (to check that verification notices).
 */
async function runInProcess(graph: Graph, wanted: string[], alter = (_key: string, value: unknown): unknown => value): Promise<unknown[]> {
  const values = new Map<string, unknown>();
  const evaluate = async (key: string): Promise<unknown> => {
    if (values.has(key)) return values.get(key);
    const spec = graph[key];
    for (const dep of dependencies(spec)) await evaluate(dep);
    const fn = builtinFunction(spec.fn) ?? ((await import(spec.fn.module)) as Record<string, (...args: unknown[]) => unknown>)[spec.fn.name];
    const value = alter(key, fn(...substitute(spec.args ?? [], (k) => values.get(k))));
    values.set(key, value);
    return value;
  };
  const out: unknown[] = [];
  for (const key of wanted) out.push(await evaluate(key));
  return out;
}

for (const name of ['shuffle', 'map-reduce'] as const) {
  test(`${name}: the graph's result verifies, and a corrupted one does not`, async () => {
    const plan = planWorkload(name, { bytes: 3 * 1024 * 1024, partitions: 5, seed: 42, method: 'tasks' });
    assert.equal(plan.dataBytes % (8 * 5), 0);
    for (const [key, spec] of Object.entries(plan.graph)) {
      for (const dep of dependencies(spec)) assert.ok(dep in plan.graph, `${key} refers to ${dep}`);
    }
    const results = await runInProcess(plan.graph, plan.wanted);
    const good = await plan.verify(results);
    assert.deepEqual(good, { verified: true, problems: [] });

    const bad = structuredClone(results) as Array<Record<string, number> | number>;
    if (name === 'shuffle') (bad[2] as Record<string, number>).sum += 1;
    else bad[2] = (bad[2] as number) + 1;
    const check = await plan.verify(bad);
    assert.equal(check.verified, false);
    assert.equal(check.problems.length, 1);
  });
}

test('shuffle: pieces land in the output their hash names, and nothing is lost', async () => {
  const plan = planWorkload('shuffle', { bytes: 1024 * 1024, partitions: 3, seed: 7, method: 'tasks' });
  const [counts, ...results] = (await runInProcess(plan.graph, plan.wanted)) as [number[][], ...Array<{ count: number; misplaced: number }>];
  assert.equal(counts.flat().reduce((a, b) => a + b, 0), plan.dataBytes / 8);
  assert.equal(results.reduce((n, r) => n + r.count, 0), plan.dataBytes / 8);
  assert.ok(results.every((r) => r.misplaced === 0 && r.count > 0));
});

test('map-reduce: the mean is exact and the deviations are not trivial', async () => {
  const plan = planWorkload('map-reduce', { bytes: 1024 * 1024, partitions: 4, seed: 9 });
  const [total, mean, ssd] = (await runInProcess(plan.graph, plan.wanted)) as [{ count: number }, number, number];
  assert.equal(total.count, plan.dataBytes / 8);
  assert.equal(mean, 65536);
  assert.ok(ssd > total.count, 'deviations average more than 1');
});

const bump = (v: unknown): unknown => {
  const copy = Float64Array.from(v as Float64Array);
  copy[copy.length >> 1] += 1;
  return copy;
};

for (const [name, keys] of [['shuffle', ['input-1', 'piece-2-1', 'output-3']], ['map-reduce', ['data-1']]] as const) {
  for (const target of keys) {
    test(`${name}: one wrong value in ${target} (a task's output, not a summary) fails verification`, async () => {
      const plan = planWorkload(name, { bytes: 1024 * 1024, partitions: 4, seed: 3, method: 'tasks' });
      const results = await runInProcess(plan.graph, plan.wanted, (key, v) => (key === target ? bump(v) : v));
      const check = await plan.verify(results);
      assert.equal(check.verified, false, JSON.stringify(check));
    });
  }
}

test('shuffle: summarize adds up over any cut of its data, past its inner ranges', () => {
  const parts = 7;
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 200_000 }), fc.integer({ min: 0, max: 200_000 }), fc.integer({ min: 1, max: 0xfffff }), (left, right, seed) => {
      const data = new Float64Array(left + right);
      let s = seed;
      for (let i = 0; i < data.length; i++) data[i] = s = (Math.imul(s, 48271) >>> 0) % 0x100000;
      const whole = summarize(data, 2, parts);
      const a = summarize(data.subarray(0, left), 2, parts);
      const b = summarize(data.subarray(left), 2, parts);
      assert.equal(whole.count, data.length);
      assert.equal(whole.sum, a.sum + b.sum);
      assert.equal(whole.fingerprint, (a.fingerprint + b.fingerprint) >>> 0);
      assert.equal(whole.misplaced, a.misplaced + b.misplaced);
      assert.equal(whole.misplaced, data.length - split(data, parts)[2].length);
      const reordered = concat([data.subarray(left), data.subarray(0, left)]);
      assert.deepEqual(summarize(reordered, 2, parts), whole);
    }),
    { numRuns: 25 },
  );
});
