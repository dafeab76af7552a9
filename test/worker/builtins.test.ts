import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BUILTINS_MODULE, Methods, builtins, ref } from '../../src/cluster/protocol.js';
import { builtinFunction } from '../../src/worker/builtins.js';
import { BuiltinArgumentError } from '../../src/worker/errors.js';
import { Worker } from '../../src/worker/index.js';
import { FakeScheduler, fn } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

const getitem = builtinFunction(builtins.getitem) ?? assert.fail('getitem is a built-in');

describe('built-in getitem', () => {
  test('takes an element of an array (negative counts from the end), a Map or a plain object', () => {
    const a = new Float64Array(4).fill(1);
    const b = new Float64Array(8).fill(2);
    assert.equal(getitem([a, b], 1), b);
    assert.equal(getitem([a, b], -2), a);
    assert.equal(getitem(new Map([[7, 'seven']]), 7), 'seven');
    assert.deepEqual(getitem({ x: { y: 1 } }, 'x'), { y: 1 });
  });

  test('an element that views a larger buffer is copied, so it never keeps its parent alive', () => {
    const whole = new Float64Array(1024).map((_, i) => i);
    const piece = whole.subarray(100, 110);
    const got = getitem([piece], 0) as Float64Array;
    assert.ok(got instanceof Float64Array);
    assert.notEqual(got.buffer, whole.buffer);
    assert.equal(got.buffer.byteLength, 80);
    assert.deepEqual([...got], [...piece]);
    const own = new Float64Array(10);
    assert.equal(getitem([own], 0), own, 'a typed array with its own buffer is not copied');
  });

  test('bad arguments throw BuiltinArgumentError with a stable code', () => {
    const cases: Array<[unknown, unknown, RegExp]> = [
      [[1, 2], 2, /out of range/],
      [[1, 2], -3, /out of range/],
      [[1, 2], 0.5, /integer/],
      [[1, 2], '0', /integer/],
      [new Map(), 'k', /no key/],
      [{ a: 1 }, 'b', /no property/],
      [{ a: 1 }, 'toString', /no property/],
      [new Float64Array(4), 0, /expected an array/],
      [null, 0, /expected an array/],
    ];
    for (const [container, key, message] of cases) {
      assert.throws(
        () => getitem(container, key),
        (err: unknown) => err instanceof BuiltinArgumentError && err.code === 'SPW_ERR_BUILTIN_ARGUMENT' && message.test(err.message),
        `${String(key)}`,
      );
    }
  });

  test('only names in spillway:builtins are built-ins', () => {
    assert.equal(builtinFunction({ module: BUILTINS_MODULE, name: 'nope' }), undefined);
    assert.equal(builtinFunction({ module: 'file:///x.js', name: 'getitem' }), undefined);
  });
});

describe('worker: built-in tasks run on its loop', () => {
  let scheduler: FakeScheduler;
  let worker: Worker;

  before(async () => {
    scheduler = await FakeScheduler.start({ token: 'secret' });
    worker = await Worker.start({ scheduler: scheduler.address, token: 'secret', memoryLimit: '256 MiB', nthreads: 1, monitorIntervalMs: false });
  });
  after(async () => {
    await worker.close();
    await scheduler.close();
  });

  test('getitem of a stored value becomes a value of its own; a bad index is a task-erred', async () => {
    const id = worker.workerId;
    scheduler.compute(id, 'parts', fn('split', 3, 1000));
    scheduler.compute(id, 'part-2', { fn: builtins.getitem, args: [ref('parts'), 2] });
    scheduler.compute(id, 'part-9', { fn: builtins.getitem, args: [ref('parts'), 9] });
    const done = await scheduler.finishedKey('part-2');
    assert.equal(done.where, 'memory');
    assert.equal(done.computeSeconds < 0.1, true, `an O(1) built-in, took ${done.computeSeconds} s`);
    const part = (await worker.store.get('part-2')) as Float64Array;
    assert.equal(part.length, 1000);
    assert.equal(part[0], 2);
    await waitFor(() => scheduler.erred.some((e) => e.key === 'part-9'), 'task-erred');
    const { error } = scheduler.erred.find((e) => e.key === 'part-9') ?? assert.fail();
    assert.equal(error.code, 'SPW_ERR_BUILTIN_ARGUMENT');
    assert.match(error.message, /out of range/);
  });

  test("a thread's result is freed when released; one a built-in took a part of is left whole", async () => {
    const id = worker.workerId;
    const counters = (): { freedBytes: number } => worker.store.stats().counters;
    scheduler.compute(id, 'made', fn('make', 1, 200_000));
    scheduler.compute(id, 'made-sum', fn('sum', ref('made')));
    await scheduler.finishedKey('made-sum');
    const before = counters().freedBytes;
    scheduler.channelOf(id).notify(Methods.releaseKeys, { keys: ['made'] });
    await waitFor(() => !worker.store.has('made'), 'made released');
    assert.equal(counters().freedBytes - before, 200_000 * 8, 'freed at once: only the store held it');

    scheduler.compute(id, 'thirds', fn('split', 3, 100_000));
    scheduler.compute(id, 'third-1', { fn: builtins.getitem, args: [ref('thirds'), 1] });
    await scheduler.finishedKey('third-1');
    const part = (await worker.store.get('third-1')) as Float64Array;
    const freed = counters().freedBytes;
    scheduler.channelOf(id).notify(Methods.releaseKeys, { keys: ['thirds'] });
    await waitFor(() => !worker.store.has('thirds'), 'thirds released');
    assert.equal(counters().freedBytes, freed, 'the built-in handed a part of it on');
    assert.equal(part.length, 100_000);
    assert.ok(part.every((x) => x === 1));
  });
});
