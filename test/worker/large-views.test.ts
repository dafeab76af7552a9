import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Executor } from '../../src/worker/executor.js';
import { MAX_POSTED_VIEW_END, liftLargeViews, restoreLargeViews } from '../../src/worker/large-views.js';
import { ext } from '../helpers/suite.js';

const TASKS = new URL(`./fixtures/tasks${ext}`, import.meta.url).href;
const GiB4 = 2 ** 32;

/**
 * Views ending past 4 GiB: V8 11 (Node 20) posts a view's byteOffset and byteLength as u32,
 * so they arrived cut modulo 2^32. These tests put a small view 4 GiB into its buffer: the
 * offset is what overflows, and only the view's own pages are ever touched (the buffer is
 * 4 GiB of address space, not of memory), where a view over 4 GiB would need 4 GiB of RAM.
 * A 4 GiB + 8 MiB Float64Array, both ways, is checked by hand (`npm run bench -- large-values`).
 */
function viewPast4GiB<T extends ArrayBufferView>(make: (buffer: ArrayBuffer, byteOffset: number) => T, bytes = 64): T {
  return make(new ArrayBuffer(GiB4 + bytes), GiB4);
}

/** What a postMessage does to a value: a structured clone, with `transfer` moved. */
function post<T>(value: T, transfer: ArrayBuffer[]): T {
  return structuredClone(value, { transfer });
}

describe('views past 4 GiB cross to and from task threads whole', () => {
  test('lifted, posted and restored: kind, offset, length, bytes, and shared references kept', () => {
    const f64 = viewPast4GiB((b, o) => new Float64Array(b, o, 8));
    for (let k = 0; k < 8; k++) f64[k] = k + 1; // not .map: that makes a new array
    const buf = viewPast4GiB((b, o) => Buffer.from(b, o, 16).fill(7));
    const dv = viewPast4GiB((b, o) => new DataView(b, o, 8));
    dv.setUint32(4, 0xdeadbeef);
    const small = new Float64Array([1, 2]);
    const value = { a: [f64, f64], m: new Map<unknown, unknown>([['k', f64], [dv, 'key']]), s: new Set([buf]), small, n: 3 };
    const lifted = liftLargeViews(value);
    assert.equal(lifted.views.length, 3);
    assert.equal(value.a[0], f64, 'the value given is not changed');
    const sent = post({ value: lifted.value, views: lifted.views }, [f64.buffer as ArrayBuffer, buf.buffer as ArrayBuffer, dv.buffer as ArrayBuffer]);
    const back = restoreLargeViews(sent.value, sent.views) as typeof value;
    const [f, f2] = back.a;
    assert.ok(f instanceof Float64Array);
    assert.equal(f, f2, 'one view twice is one view');
    assert.equal(back.m.get('k'), f);
    assert.equal(f.byteOffset, GiB4);
    assert.deepEqual(Array.from(f), [1, 2, 3, 4, 5, 6, 7, 8]);
    const [b] = [...back.s] as Uint8Array[];
    assert.equal(Object.getPrototypeOf(b), Uint8Array.prototype, 'a Buffer arrives as a Uint8Array, as a clone makes it');
    assert.equal(b.byteOffset, GiB4);
    assert.deepEqual(Array.from(b), new Array(16).fill(7));
    const [d] = [...back.m.keys()].filter((k) => k instanceof DataView) as DataView[];
    assert.equal(d.byteOffset, GiB4);
    assert.equal(d.getUint32(4), 0xdeadbeef);
    assert.deepEqual(back.small, small);
    assert.equal(back.n, 3);
  });

  test('a value with no such view goes as it is, and data shaped like a lifted view is left alone', () => {
    const value = { a: [new Float64Array(4), 1], lookalike: { buffer: new ArrayBuffer(8), byteOffset: 0, length: 1, kind: 'Float64Array' } };
    const lifted = liftLargeViews(value);
    assert.equal(lifted.value, value);
    assert.deepEqual(lifted.views, []);
    const back = restoreLargeViews(post(value, []), lifted.views) as typeof value;
    assert.ok(!ArrayBuffer.isView(back.lookalike));
    // Also when other views are lifted from the same message.
    const big = viewPast4GiB((b, o) => new Float64Array(b, o, 1));
    const mixed = liftLargeViews({ big, lookalike: value.lookalike });
    const sent = post({ value: mixed.value, views: mixed.views }, [big.buffer as ArrayBuffer]);
    const again = restoreLargeViews(sent.value, sent.views) as { big: Float64Array; lookalike: object };
    assert.ok(again.big instanceof Float64Array && again.big.byteOffset === GiB4);
    assert.ok(!ArrayBuffer.isView(again.lookalike));
  });

  test('only views ending past 4 GiB are lifted', () => {
    const buffer = new ArrayBuffer(GiB4 + 8);
    assert.equal(liftLargeViews(new Uint8Array(buffer, MAX_POSTED_VIEW_END - 8, 8)).views.length, 0);
    assert.equal(liftLargeViews(new Uint8Array(buffer, MAX_POSTED_VIEW_END - 8, 9)).views.length, 1);
  });

  test("a task's result and a shared input past 4 GiB cross the executor whole", async () => {
    const executor = new Executor(1);
    try {
      for (const inObject of [false, true]) {
        const result = await executor.run({ module: TASKS, name: 'viewPast4GiB' }, [8, inObject]);
        assert.ok(result.ok, JSON.stringify(result));
        const view = (inObject ? (result.value as { view: Float64Array }).view : result.value) as Float64Array;
        assert.ok(view instanceof Float64Array);
        assert.equal(view.byteOffset, GiB4);
        assert.deepEqual(Array.from(view), [1, 2, 3, 4, 5, 6, 7, 8]);
      }
      // Shared memory is not copied for the thread (copy-inputs.ts): the view itself is posted.
      const shared = new Float64Array(new SharedArrayBuffer(GiB4 + 32), GiB4, 4);
      shared.set([10, 20, 30, 40]);
      const seen = await executor.run({ module: TASKS, name: 'describeView' }, [shared]);
      assert.ok(seen.ok, JSON.stringify(seen));
      assert.deepEqual(seen.value, { byteOffset: GiB4, bufferBytes: GiB4 + 32, values: [10, 20, 30, 40] });
    } finally {
      await executor.close();
    }
  });
});
