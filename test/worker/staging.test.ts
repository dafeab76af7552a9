import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { InvalidArgumentError } from '../../src/errors.js';
import { threadInputs } from '../../src/worker/copy-inputs.js';
import { Executor } from '../../src/worker/executor.js';
import { STAGE_MIN_BYTES, StagingPool, unstage } from '../../src/worker/staging.js';
import { ext } from '../helpers/suite.js';

const TASKS = new URL(`./fixtures/tasks${ext}`, import.meta.url).href;
const fn = (name: string) => ({ module: TASKS, name });
const MiB = 1 << 20;

function counting(length: number, from = 0): Float64Array {
  const array = new Float64Array(length);
  for (let i = 0; i < length; i++) array[i] = from + i;
  return array;
}

describe('StagingPool', () => {
  test('reuses what is given back, and makes no more than maxBytes in all', () => {
    const pool = new StagingPool(5 * MiB);
    const a = pool.take(2 * MiB);
    assert.ok(a instanceof SharedArrayBuffer);
    assert.equal(a.byteLength, 2 * MiB);
    const b = pool.take(2 * MiB + 1); // a quarter more at most: the next size, 2.5 MiB
    assert.equal(b?.byteLength, 2.5 * MiB);
    assert.equal(pool.madeBytes, 4.5 * MiB);
    assert.equal(pool.take(MiB), undefined, 'past maxBytes: the caller copies as before');
    assert.equal(pool.refused, 1);
    pool.give(a);
    assert.equal(pool.take(2 * MiB), a, 'the spare is lent again');
    pool.give(b as SharedArrayBuffer);
    assert.equal(pool.take(2 * MiB), b, 'a spare one size up will do');
    assert.equal(pool.madeBytes, 4.5 * MiB, 'nothing more was made');
    assert.equal(pool.staged, 4);
  });

  test('ignores buffers it did not lend, and a second give of the same one', () => {
    const pool = new StagingPool(4 * MiB);
    pool.give(new SharedArrayBuffer(MiB));
    const a = pool.take(MiB) as SharedArrayBuffer;
    assert.equal(pool.madeBytes, MiB, 'the stranger was not kept as a spare');
    pool.give(a);
    pool.give(a);
    assert.equal(pool.take(MiB), a);
    assert.notEqual(pool.take(MiB), a, 'given twice, lent once');
  });

  test('refuses sizes that are not whole numbers', () => {
    assert.throws(() => new StagingPool(-1), InvalidArgumentError);
    assert.throws(() => new StagingPool(1.5), InvalidArgumentError);
    assert.throws(() => new StagingPool(MiB).take(-1), InvalidArgumentError);
    assert.throws(() => new StagingPool(MiB).take(Number.NaN), InvalidArgumentError);
  });
});

describe('unstage', () => {
  test('gives each view of a staging buffer memory of its own, of the same type, in place', () => {
    const staging = new SharedArrayBuffer(64);
    new Float64Array(staging).set([1, 2, 3, 4, 5, 6, 7, 8]);
    const user = new Float64Array(new SharedArrayBuffer(16)); // shared by the caller: stays shared
    const args: unknown[] = [new Float64Array(staging, 0, 4), { nested: [new Uint8Array(staging, 32, 8)] }, new Map([['k', new DataView(staging, 8, 8)]]), new Set([new Float64Array(staging, 16, 2)]), user, 7];
    const { value, copies } = unstage(args, new Set([staging]));
    assert.equal(value, args, 'the message\'s own containers are changed in place');
    const [floats, record, map, set] = args as [Float64Array, { nested: Uint8Array[] }, Map<string, DataView>, Set<Float64Array>];
    assert.ok(floats instanceof Float64Array && floats.buffer instanceof ArrayBuffer);
    assert.deepEqual([...floats], [1, 2, 3, 4]);
    assert.ok(record.nested[0] instanceof Uint8Array && record.nested[0].buffer instanceof ArrayBuffer);
    assert.deepEqual([...record.nested[0]], [...new Uint8Array(staging, 32, 8)]);
    const view = map.get('k') as DataView;
    assert.ok(view instanceof DataView && view.buffer instanceof ArrayBuffer);
    assert.equal(view.getFloat64(0, true), 2);
    const [fromSet] = [...set];
    assert.ok(fromSet.buffer instanceof ArrayBuffer);
    assert.deepEqual([...fromSet], [3, 4]);
    assert.equal(args[4], user, 'a view of shared memory the caller made is not a staging buffer');
    assert.equal(copies.length, 4);
    new Float64Array(staging).fill(0);
    assert.deepEqual([...floats], [1, 2, 3, 4], 'the copies no longer see the staging buffer');
  });

  test('a top-level view is replaced too, and a value without staged views is left alone', () => {
    const staging = new SharedArrayBuffer(8);
    const { value, copies } = unstage(new Uint8Array(staging), new Set([staging]));
    assert.ok((value as Uint8Array).buffer instanceof ArrayBuffer);
    assert.equal(copies.length, 1);
    const plain = [1, 'two', { three: new Float64Array(2) }];
    assert.deepEqual(unstage(plain, new Set([staging])).copies, []);
  });
});

describe('threadInputs with staging', () => {
  test('copies large views into the staging buffer instead of a fresh one, moved by none', async () => {
    const pool = new StagingPool(8 * MiB);
    const large = counting(STAGE_MIN_BYTES / 8);
    const small = counting(STAGE_MIN_BYTES / 8 - 1);
    const { args, transfer, staged } = await threadInputs([large, small], undefined, undefined, (n) => pool.take(n));
    const [stagedLarge, copiedSmall] = args as [Float64Array, Float64Array];
    assert.ok(stagedLarge.buffer instanceof SharedArrayBuffer);
    assert.deepEqual(staged, [stagedLarge.buffer]);
    assert.equal(stagedLarge.length, large.length);
    assert.equal(stagedLarge[12345], 12345);
    assert.ok(copiedSmall.buffer instanceof ArrayBuffer, 'below STAGE_MIN_BYTES: a copy of its own, as before');
    assert.deepEqual(transfer, [copiedSmall.buffer]);
  });

  test('without a staging buffer to spare, copies as before', async () => {
    const large = counting(STAGE_MIN_BYTES / 8);
    const { args, transfer, staged } = await threadInputs([large], undefined, undefined, () => undefined);
    assert.deepEqual(staged, []);
    assert.ok((args[0] as Float64Array).buffer instanceof ArrayBuffer);
    assert.deepEqual(transfer, [(args[0] as Float64Array).buffer]);
  });
});

describe('Executor with staging', () => {
  const executor = new Executor(1, { stagingBytes: 4 * MiB });
  const tight = new Executor(1, { stagingBytes: MiB });
  after(() => Promise.all([executor.close(), tight.close()]));
  const input = (): Float64Array => counting((2 * MiB) / 8, 1);

  test('a staged input reaches the task as memory of the thread\'s own, of its exact size', async () => {
    const before = executor.staging.staged;
    const shared = await executor.run(fn('isShared'), [input()]);
    assert.deepEqual(shared.ok && shared.value, false);
    assert.equal(executor.staging.staged, before + 1, 'it crossed in a staging buffer');
    const described = await executor.run(fn('describeView'), [input().subarray(0, 4)]);
    assert.equal(described.ok, true, 'a small view is copied as before');
    const whole = await executor.run(fn('describeView'), [input()]);
    assert.ok(whole.ok);
    const view = whole.value as { byteOffset: number; bufferBytes: number; values: number[] };
    assert.equal(view.byteOffset, 0);
    assert.equal(view.bufferBytes, 2 * MiB);
    assert.equal(view.values[1000], 1001);
  });

  test('the task cannot reach the caller\'s value, and what it returns of its input arrives whole', async () => {
    const original = input();
    const wrote = await executor.run(fn('writeInto'), [original, 5, -1]);
    assert.deepEqual(wrote.ok && wrote.value, false, 'the task wrote into memory of its own');
    assert.equal(original[5], 6);
    const middle = await executor.run(fn('middle'), [input()]);
    assert.ok(middle.ok);
    const value = middle.value as Float64Array;
    assert.ok(value.buffer instanceof ArrayBuffer, 'not a view of the staging buffer, which the next task reuses');
    assert.equal(value.length, (2 * MiB) / 8 / 2);
    assert.equal(value[0], (2 * MiB) / 8 / 4 + 1);
    await executor.run(fn('isShared'), [counting((2 * MiB) / 8, 100)]);
    assert.equal(value[0], (2 * MiB) / 8 / 4 + 1, 'unchanged after the staging buffer carried the next input');
  });

  test('the staging buffer comes back however the task ends; shared memory the caller made stays shared', async () => {
    await executor.run(fn('isShared'), [input()]);
    const made = executor.staging.madeBytes;
    const failed = await executor.run(fn('slowFail'), [input(), 10]);
    assert.equal(failed.ok, false);
    const again = await executor.run(fn('isShared'), [input()]);
    assert.deepEqual(again.ok && again.value, false);
    assert.equal(executor.staging.madeBytes, made, 'the failed task\'s buffer was lent again, none made');
    const user = new Float64Array(new SharedArrayBuffer(2 * MiB));
    const before = executor.staging.staged;
    const shared = await executor.run(fn('isShared'), [user]);
    assert.deepEqual(shared.ok && shared.value, true);
    assert.equal(executor.staging.staged, before, 'not staged: shared as it is');
  });

  test('an input the staging memory cannot hold is copied as before', async () => {
    const result = await tight.run(fn('describeView'), [input()]);
    assert.ok(result.ok);
    assert.equal((result.value as { values: number[] }).values[7], 8);
    assert.equal(tight.staging.refused, 1);
    assert.equal(tight.staging.madeBytes, 0);
  });
});
