/** Verification fails when one task's output (not its summary) is wrong. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dependencies, substitute, type Graph } from '../../src/cluster/protocol.js';
import { builtinFunction } from '../../src/worker/builtins.js';
import { planWorkload } from '../../src/workloads/index.js';

async function run(graph: Graph, wanted: string[], corrupt: (key: string, value: unknown) => unknown): Promise<unknown[]> {
  const values = new Map<string, unknown>();
  const evaluate = async (key: string): Promise<unknown> => {
    if (values.has(key)) return values.get(key);
    const spec = graph[key];
    for (const dep of dependencies(spec)) await evaluate(dep);
    const fn = builtinFunction(spec.fn) ?? ((await import(spec.fn.module)) as Record<string, (...args: unknown[]) => unknown>)[spec.fn.name];
    const value = corrupt(key, fn(...substitute(spec.args ?? [], (k) => values.get(k))));
    values.set(key, value);
    return value;
  };
  const out: unknown[] = [];
  for (const key of wanted) out.push(await evaluate(key));
  return out;
}

const bump = (v: unknown): unknown => {
  const copy = Float64Array.from(v as Float64Array);
  copy[copy.length >> 1] += 1;
  return copy;
};

for (const [name, keys] of [['shuffle', ['input-1', 'piece-2-1', 'output-3']], ['map-reduce', ['data-1']]] as const) {
  for (const target of keys) {
    test(`${name}: one wrong value in ${target} fails verification`, async () => {
      const plan = planWorkload(name, { bytes: 1024 * 1024, partitions: 4, seed: 3 });
      const results = await run(plan.graph, plan.wanted, (key, v) => (key === target ? bump(v) : v));
      const check = await plan.verify(results);
      assert.equal(check.verified, false, JSON.stringify(check));
    });
  }
}
