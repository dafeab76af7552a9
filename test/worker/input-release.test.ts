import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Executor } from '../../src/worker/executor.js';
import { ext } from '../helpers/suite.js';

const TASKS = new URL(`./fixtures/tasks${ext}`, import.meta.url).href;
const fn = (name: string) => ({ module: TASKS, name });

// No collector: whatever the thread frees here, it frees without a collection.
const executor = new Executor(1, { collectGarbage: false });
after(() => executor.close());

const MiB = 1024 * 1024;

function counting(length: number): Float64Array {
  const array = new Float64Array(length);
  for (let i = 0; i < length; i++) array[i] = i;
  return array;
}

type KeptState = { length: number; arrayBuffers: number };

async function keptState(): Promise<KeptState> {
  const state = await executor.run(fn('keptState'), []);
  assert.equal(state.ok, true);
  return (state as { value: KeptState }).value;
}

test("a task's own copy of its input is freed once it returns, without a collection", async () => {
  const input = counting((8 * MiB) / 8);
  const result = await executor.run(fn('keep'), [input]);
  assert.equal(result.ok, true);
  assert.equal((result as { value: number }).value, input.length);
  assert.equal(input[12345], 12345, "the caller's value is untouched");
  const state = await keptState();
  assert.equal(state.length, 0, 'the copy the task kept is detached');
  assert.ok(state.arrayBuffers < 4 * MiB, `the thread holds ${state.arrayBuffers} bytes of buffers`);
});

test('a result that views its input arrives whole', async () => {
  const input = counting(MiB / 8);
  const view = await executor.run(fn('middle'), [input]);
  assert.equal(view.ok, true);
  const got = (view as { value: Float64Array }).value;
  assert.equal(got.length, input.length / 2);
  assert.equal(got[0], input.length / 4);
  assert.equal(got[got.length - 1], (input.length * 3) / 4 - 1);

  // Inside a class instance, where no walk of the result looks: the message copies it before the input is freed.
  const boxed = await executor.run(fn('boxed'), [input]);
  assert.equal(boxed.ok, true);
  const inner = (boxed as { value: { view: Float64Array } }).value.view;
  assert.equal(inner.length, input.length - 1);
  assert.equal(inner[0], 1);
  assert.equal(inner[inner.length - 1], input.length - 1);
});

test('a failed task frees its copies too; a shared input is never freed', async () => {
  const failed = await executor.run(fn('fail'), ['no', counting(MiB / 8)]);
  assert.equal(failed.ok, false);

  const shared = new Float64Array(new SharedArrayBuffer(MiB));
  shared[7] = 7;
  const kept = await executor.run(fn('keep'), [shared]);
  assert.equal(kept.ok, true);
  const state = await keptState();
  assert.equal(state.length, shared.length, 'the shared buffer is the caller\'s memory: left as it is');
  assert.equal(shared[7], 7);
});
