/**
 * Values of registered types between the worker's loop and its task threads
 * (src/worker/typed-crossing.ts), on a real Executor.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import * as arrow from 'apache-arrow';
import { EncodedTypedValue, registerArrow } from '../../src/index.js';
import { Executor } from '../../src/worker/executor.js';
import { liftTypedValues, restoreTypedValues } from '../../src/worker/typed-crossing.js';
import { Series } from '../cluster/fixtures/typed.js';
import { ext } from '../helpers/suite.js';

registerArrow(arrow);
const fn = (name: string): { module: string; name: string } => ({ module: new URL(`../cluster/fixtures/typed${ext}`, import.meta.url).href, name });

describe('values of registered types crossing to and from task threads', () => {
  const executor = new Executor(1);
  after(() => executor.close());

  it('a task result is held encoded on the loop, and the next task gets the values themselves', async () => {
    const made = await executor.run(fn('makePart'), [3, 100_000, 20_000]);
    assert.ok(made.ok, JSON.stringify(made));
    const part = made.value as { table: unknown; series: unknown };
    assert.ok(part.table instanceof EncodedTypedValue && part.table.name === 'spillway.arrow');
    assert.ok(part.series instanceof EncodedTypedValue && part.series.name === 'test.Series');
    // Large buffers came across moved, not copied: the table's value column is one of them, whole.
    assert.ok(part.table.buffers.some((b) => b.byteLength === 800_000));
    for (const moveInputs of [true, false]) {
      const other = moveInputs ? executor : new Executor(1, { moveInputs: false });
      try {
        const used = await other.run(fn('summarize'), [part, part]);
        assert.ok(used.ok, JSON.stringify(used));
        const summary = used.value as { tables: number[]; series: number[]; labels: string[] };
        let cycle = 0;
        for (let r = 0; r < 100_000; r++) cycle += r % 7;
        assert.deepEqual(summary.tables, [300_000 + cycle, 300_000 + cycle]);
        assert.deepEqual(summary.series, [60_000, 60_000]);
        assert.deepEqual(summary.labels, ['part-3', 'part-3']);
      } finally {
        if (other !== executor) await other.close();
      }
    }
  });

  it('decoded values (read from disk on the loop) cross too', async () => {
    const table = new arrow.Table({ value: arrow.makeVector(Float64Array.from([1, 2, 3, 4, 5])), tag: arrow.vectorFromArray(['t0', 't1', 't2', 't0', 't1']) });
    const series = new Series('here', Float64Array.from([4, 5]));
    const used = await executor.run(fn('summarize'), [{ table, series, pid: 0 }]);
    assert.ok(used.ok, JSON.stringify(used));
    assert.deepEqual((used.value as { tables: number[]; series: number[] }).tables, [15]);
    assert.deepEqual((used.value as { tables: number[]; series: number[] }).series, [9]);
  });

  it('a large one crosses in a staging buffer, and the thread decodes memory of its own', async () => {
    const staged = new Executor(1, { stagingBytes: 16 * 1024 * 1024 });
    try {
      const made = await Promise.all([2, 5].map((i) => staged.run(fn('makePart'), [i, 200_000, 10])));
      const [two, five] = made.map((m) => {
        assert.ok(m.ok, JSON.stringify(m));
        return m.value as { table: EncodedTypedValue };
      });
      const before = staged.staging.staged;
      const used = await staged.run(fn('summarize'), [two]);
      assert.ok(used.ok, JSON.stringify(used));
      assert.equal(staged.staging.staged, before + 1, 'the table (3 MiB of frames) crossed staged, the small series did not');
      let cycle = 0;
      for (let r = 0; r < 200_000; r++) cycle += r % 7;
      assert.deepEqual((used.value as { tables: number[] }).tables, [400_000 + cycle]);
      // A result that views its input arrives in memory of its own: the staging buffer
      // carries the next task's input.
      const echoed = await staged.run(fn('firstTable'), [two]);
      assert.ok(echoed.ok, JSON.stringify(echoed));
      const kept = echoed.value as EncodedTypedValue;
      assert.ok(kept.buffers.every((b) => b.buffer instanceof ArrayBuffer), 'not views of a staging buffer');
      const bytes = kept.buffers.map((b) => Uint8Array.from(b));
      assert.ok((await staged.run(fn('summarize'), [five])).ok);
      assert.deepEqual(kept.buffers.map((b) => Uint8Array.from(b)), bytes, 'unchanged after the next task');
      assert.ok(staged.staging.staged >= before + 3);
    } finally {
      await staged.close();
    }
  });

  it('a type the task thread does not know is the task\'s SPW_ERR_UNKNOWN_TYPE, and an encode that fails its SPW_ERR_CODEC', async () => {
    const unknown = new EncodedTypedValue('nobody.registered', null, [new Uint8Array(8)]);
    const run = await executor.run(fn('summarize'), [{ table: unknown, series: unknown, pid: 0 }]);
    assert.equal(run.ok, false);
    assert.equal(!run.ok && run.error.code, 'SPW_ERR_UNKNOWN_TYPE');
    const broken = await executor.run(fn('makeUnencodable'), []);
    assert.equal(broken.ok, false);
    assert.equal(!broken.ok && broken.error.code, 'SPW_ERR_CODEC');
    assert.match(!broken.ok ? broken.error.message : '', /test\.Broken/);
  });

  it('user data shaped like a crossing value is left alone; shared references stay shared', () => {
    const lookalike = { '\u0000spillway.typed': 'guess', name: 'test.Series', meta: null, buffers: [new Uint8Array(8)] };
    assert.equal(restoreTypedValues({ a: lookalike }, 'the-real-brand', 'decode') instanceof Object, true);
    const restored = restoreTypedValues([lookalike], 'the-real-brand', 'decode') as unknown[];
    assert.equal(restored[0], lookalike);
    const series = new Series('s', new Float64Array(2));
    const lifted = liftTypedValues({ a: series, b: series, plain: [1, 2] }, 'brand');
    assert.equal(lifted.count, 1);
    const value = lifted.value as Record<string, unknown>;
    assert.equal(value.a, value.b);
    const nothing = { plain: [1, 2] };
    assert.equal(liftTypedValues(nothing, 'brand').value, nothing, 'nothing copied when nothing is typed');
  });
});
