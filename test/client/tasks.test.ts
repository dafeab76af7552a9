import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defineTasks, Delayed, graphOf } from '../../src/client/tasks.js';
import { checkDefinedFunctions, validateGraph } from '../../src/client/validate.js';
import { GraphError, InvalidArgumentError } from '../../src/errors.js';
import { tasks } from '../cluster/fixtures/typed-tasks.js';
import { tasks as misnamed } from '../cluster/fixtures/misnamed-tasks.js';
import { ext } from '../helpers/suite.js';

test('a task call is a lazy task whose key follows its function and arguments', () => {
  const a = tasks.load(1, 10);
  assert.ok(a instanceof Delayed);
  assert.match(a.key, /^load-[0-9a-f]{32}$/);
  assert.equal(tasks.load(1, 10).key, a.key, 'equal calls, equal keys');
  assert.notEqual(tasks.load(1, 11).key, a.key);
  assert.notEqual(tasks.load.with({ pure: false })(1, 10).key, tasks.load.with({ pure: false })(1, 10).key, 'impure calls get keys of their own');
  assert.deepEqual(a.spec, { fn: tasks.load.fn, args: [1, 10] });
  assert.deepEqual(tasks.load.fn, { module: new URL(`../cluster/fixtures/typed-tasks${ext}`, import.meta.url).href, name: 'load' });
});

test('lazy tasks given as arguments become references; their graph holds every task once', () => {
  const rows = tasks.load(2);
  const total = tasks.total(rows);
  const both = tasks.sum([total, tasks.total(rows), 3]);
  assert.deepEqual(both.spec.args, [[{ $ref: total.key }, { $ref: total.key }, 3]]);
  const { graph, futures } = graphOf([both]);
  assert.deepEqual(Object.keys(graph).sort(), [both.key, total.key, rows.key].sort());
  assert.equal(futures.size, 0);
});

test('data that looks like a reference is passed as it is, not as a reference', () => {
  const value = tasks.describe({ name: 'x', tags: [] });
  assert.deepEqual(value.spec.args, [{ name: 'x', tags: [] }]);
  const lookalike = tasks.sum([{ $ref: 'elsewhere' } as unknown as number]);
  assert.deepEqual(lookalike.spec.args, [[{ $literal: { $ref: 'elsewhere' } }]]);
  assert.deepEqual(graphOf([lookalike]).graph[lookalike.key].args, [[{ $literal: { $ref: 'elsewhere' } }]]);
});

test('options: retries and a memory hint go into the spec; bad options are typed errors', () => {
  const hinted = tasks.fill.with({ memory: '2 GiB', retries: 2 })(10, 1);
  assert.deepEqual(hinted.spec, { fn: tasks.fill.fn, args: [10, 1], retries: 2, memory: 2 * 2 ** 30 });
  assert.equal(hinted.key, tasks.fill(10, 1).key, 'options do not change what is computed');
  assert.deepEqual(tasks.fill.with({ retries: 1 }).with({ memory: 1024 }).options, { retries: 1, memory: 1024 });
  assert.throws(() => tasks.fill.with({ memory: 'lots' }), InvalidArgumentError);
  assert.throws(() => tasks.fill.with({ retries: -1 }), InvalidArgumentError);
  assert.throws(() => tasks.fill.with({ retries: 1.5 }), InvalidArgumentError);
});

test('arguments that cannot reach a worker are refused when the task is made', () => {
  assert.throws(() => tasks.sum([(() => 1) as unknown as number]), GraphError);
  assert.throws(() => tasks.describe(new Map() as never), /Map/);
  const cyclic: unknown[] = [];
  cyclic.push(cyclic);
  assert.throws(() => tasks.sum(cyclic as number[]), /cycle/);
});

test('defineTasks checks what it is given', () => {
  assert.throws(() => defineTasks('', { f: () => 1 }), InvalidArgumentError);
  assert.throws(() => defineTasks(import.meta.url, { f: 42 as unknown as () => number }), InvalidArgumentError);
  const byUrl = defineTasks(new URL(import.meta.url), { f: () => 1 });
  assert.equal(byUrl.f.fn.module, import.meta.url);
});

test('validation: a task named after another export than its function is a GraphError', async () => {
  const checks = new Map<string, Promise<string | undefined>>();
  await checkDefinedFunctions(graphOf([tasks.total(tasks.load(1))]).graph);
  const bad = misnamed.total([1]);
  await assert.rejects(checkDefinedFunctions(graphOf([bad]).graph), (e: unknown) => e instanceof GraphError && /another function/.test(e.message));
  await assert.rejects(validateGraph({ k: { fn: tasks.load.fn, args: [], memory: 'much' } }, ['k'], checks), (e: unknown) => e instanceof GraphError && /memory/.test(e.message));
});
