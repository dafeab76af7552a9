import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Executor } from '../../src/worker/executor.js';
import { ext } from '../helpers/suite.js';

const TASKS = new URL(`./fixtures/tasks${ext}`, import.meta.url).href;
const fn = (name: string) => ({ module: TASKS, name });

const executor = new Executor(1);
after(() => executor.close());

function lentArray(length: number, seed: number): Float64Array {
  const array = new Float64Array(length);
  for (let i = 0; i < length; i++) array[i] = seed + i;
  return array;
}

test('a lent buffer moves to the thread uncopied and comes back with the result, the same memory', async () => {
  const array = lentArray(1 << 14, 1); // 128 KiB: large enough that it would otherwise be copied
  const buffer = array.buffer as ArrayBuffer;
  const result = await executor.run(fn('writeInto'), [array, 5, -1], { lend: [buffer] });
  assert.equal(result.ok, true);
  assert.equal(buffer.byteLength, 0, 'moved, not copied: the caller gave it up');
  assert.equal(result.lent?.length, 1);
  const back = new Float64Array(result.lent?.[0] as ArrayBuffer);
  assert.equal(back[5], -1, 'the thread wrote into the lent memory itself');
  assert.equal(back[6], 7);
  // Not lent: copied as before, and nothing comes back.
  const other = lentArray(1 << 14, 1);
  const plain = await executor.run(fn('writeInto'), [other, 5, -1]);
  assert.equal(plain.ok, true);
  assert.equal(plain.lent, undefined);
  assert.equal(other[5], 6, 'an input not lent is a copy');
});

test('lent buffers come back from a failed task; one the result holds travels with the result instead', async () => {
  const a = lentArray(1 << 14, 3);
  const failed = await executor.run(fn('fail'), ['no', a], { lend: [a.buffer as ArrayBuffer] });
  assert.equal(failed.ok, false);
  assert.equal(failed.lent?.length, 1);
  assert.deepEqual(failed.lentAt, [0]);
  assert.equal(new Float64Array(failed.lent?.[0] as ArrayBuffer)[9], 12);

  const held = lentArray(1 << 14, 4);
  const free = lentArray(1 << 14, 5);
  const result = await executor.run(fn('slow'), [held, 0, free], { lend: [held.buffer as ArrayBuffer, free.buffer as ArrayBuffer] });
  assert.equal(result.ok, true);
  const value = (result as { value: Float64Array }).value;
  assert.equal(value[100], 104, 'the result is the lent memory, whole');
  assert.equal(result.lent?.length, 1, 'only the buffer the result does not hold comes back');
  assert.deepEqual(result.lentAt, [1], 'and it was the second one lent');
  assert.notEqual(result.lent?.[0], value.buffer);
  assert.equal(new Float64Array(result.lent?.[0] as ArrayBuffer)[100], 105);
});
