import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MOVE_MIN_BYTES, threadInputs } from '../../src/worker/copy-inputs.js';

const big = MOVE_MIN_BYTES / 8;

describe('task inputs for a thread: large binaries copied to move, the store keeps its own', () => {
  test('large typed arrays and ArrayBuffers are copied, listed for transfer, and keep their type', async () => {
    const f = new Float64Array(big).fill(1.5);
    const i = new Int32Array(big * 2).fill(-7);
    const raw = new ArrayBuffer(MOVE_MIN_BYTES);
    const { args, transfer, copiedBytes } = await threadInputs([f, { nested: [i] }, raw]);
    const [f2, obj, raw2] = args as [Float64Array, { nested: Int32Array[] }, ArrayBuffer];
    assert.ok(f2 instanceof Float64Array && f2 !== f && f2.buffer !== f.buffer);
    assert.deepEqual(f2, f);
    assert.ok(obj.nested[0] instanceof Int32Array);
    assert.deepEqual(obj.nested[0], i);
    assert.ok(raw2 instanceof ArrayBuffer && raw2 !== raw && raw2.byteLength === raw.byteLength);
    assert.deepEqual(new Set(transfer), new Set([f2.buffer, obj.nested[0].buffer, raw2]));
    assert.equal(copiedBytes, f.byteLength + i.byteLength + raw.byteLength);
    // Moving the copies leaves the originals whole.
    structuredClone(args, { transfer });
    assert.equal(f.length, big);
    assert.equal(f[big - 1], 1.5);
    assert.equal(f2.length, 0, 'the copy was moved');
  });

  test('a view into a larger buffer is copied alone; a Buffer arrives as a Uint8Array, as a clone would make it', async () => {
    const whole = new Float64Array(big * 4).map((_, k) => k);
    const view = whole.subarray(big, 2 * big);
    const buf = Buffer.alloc(MOVE_MIN_BYTES, 3);
    const { args } = await threadInputs([view, buf]);
    const [v2, b2] = args as [Float64Array, Uint8Array];
    assert.equal(v2.byteOffset, 0);
    assert.equal(v2.buffer.byteLength, view.byteLength);
    assert.deepEqual([...v2.subarray(0, 3)], [big, big + 1, big + 2]);
    assert.equal(Object.getPrototypeOf(b2), Uint8Array.prototype);
    assert.equal(b2[100], 3);
  });

  test('small binaries, SharedArrayBuffer-backed values and plain data pass unchanged', async () => {
    const small = new Float64Array(16);
    const shared = new Float64Array(new SharedArrayBuffer(MOVE_MIN_BYTES));
    const { args, transfer, copiedBytes } = await threadInputs([small, shared, 42, 'text', null, { a: [1, 2] }]);
    assert.equal(args[0], small);
    assert.equal(args[1], shared);
    assert.deepEqual(args.slice(2), [42, 'text', null, { a: [1, 2] }]);
    assert.deepEqual(transfer, []);
    assert.equal(copiedBytes, 0);
  });

  test('one value referenced twice is copied once; cycles and Maps survive', async () => {
    const f = new Float64Array(big);
    const list: unknown[] = [f, f];
    list.push(list);
    const map = new Map<string, unknown>([['x', f]]);
    const { args, transfer } = await threadInputs([list, map]);
    const [list2, map2] = args as [unknown[], Map<string, unknown>];
    assert.equal(list2[0], list2[1]);
    assert.equal(list2[2], list2);
    assert.equal(map2.get('x'), list2[0]);
    assert.equal(transfer.length, 1);
  });

  test('a large input is copied in steps, with loop turns in between, and arrives whole', async () => {
    // 64 MiB: far more than one slice of copying on any machine.
    const large = new Float64Array((64 * 1024 * 1024) / 8).map((_, k) => k);
    let turns = 0;
    const ticker = setInterval(() => turns++, 0);
    try {
      const { args } = await threadInputs([large]);
      const copy = args[0] as Float64Array;
      assert.ok(turns > 0, 'timers ran while it copied');
      assert.equal(copy.length, large.length);
      for (const k of [0, 1, 32767, 32768, large.length - 1]) assert.equal(copy[k], k);
      assert.deepEqual(copy, large);
    } finally {
      clearInterval(ticker);
    }
  });
});
