import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RELEASE_MIN_BYTES, buffersIn, releaseBuffers } from '../../src/runtime/buffer-release.js';

test('releaseBuffers detaches each buffer and returns the bytes freed', () => {
  const a = new Float64Array(RELEASE_MIN_BYTES / 8);
  const b = new ArrayBuffer(RELEASE_MIN_BYTES * 2);
  assert.equal(releaseBuffers([a.buffer, b]), RELEASE_MIN_BYTES * 3);
  assert.equal(a.buffer.byteLength, 0);
  assert.equal(a.length, 0, 'views of a released buffer read as empty');
  assert.equal(b.byteLength, 0);
  assert.equal(releaseBuffers([b]), 0, 'a buffer released already frees nothing more');
});

test('a buffer Node cannot move is left as it is; the others in the same call are freed', () => {
  // A pooled Buffer's slab is marked untransferable: Node 22+ refuse it, Node 20 clones it.
  const pooled = Buffer.from('pooled');
  const slab = pooled.buffer as ArrayBuffer;
  const other = new ArrayBuffer(RELEASE_MIN_BYTES);
  assert.equal(releaseBuffers([slab, other]), RELEASE_MIN_BYTES);
  assert.equal(other.byteLength, 0);
  assert.ok(slab.byteLength > 0);
  assert.equal(pooled.toString(), 'pooled');
});

test('buffersIn finds large buffers through arrays, plain objects, Maps and Sets, once each', () => {
  const big = (): Float64Array => new Float64Array(RELEASE_MIN_BYTES / 8);
  const [x, y, z, w] = [big(), big(), big(), big()];
  const small = new Float64Array(16);
  const shared = new Float64Array(new SharedArrayBuffer(RELEASE_MIN_BYTES));
  class Holder {
    constructor(readonly inside: Float64Array) {}
  }
  const value = { x, list: [y, x.subarray(1), small], map: new Map([['z', z]]), set: new Set([new DataView(w.buffer)]), shared, held: new Holder(big()) };
  const found = [...buffersIn(value, RELEASE_MIN_BYTES)];
  assert.deepEqual(new Set(found), new Set([x.buffer, y.buffer, z.buffer, w.buffer]));
  assert.equal(found.length, 4);
  assert.deepEqual([...buffersIn(x.buffer, RELEASE_MIN_BYTES)], [x.buffer]);
  assert.deepEqual([...buffersIn('text', RELEASE_MIN_BYTES)], []);
  const cyclic: unknown[] = [x];
  cyclic.push(cyclic);
  assert.deepEqual([...buffersIn(cyclic, RELEASE_MIN_BYTES)], [x.buffer]);
  assert.ok(buffersIn(value, RELEASE_MIN_BYTES, true).has(shared.buffer), 'shared ones only when asked for');
});
