import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SizedBufferPool } from '../../src/runtime/sized-buffer-pool.js';

const KiB = 1024;

test('a buffer given back is handed out again for a request of its size (or one size down), once', () => {
  const pool = new SizedBufferPool({ minBytes: 64 * KiB, maxBytes: 8 * 1024 * KiB, maxSpareBytes: 8 * 1024 * KiB });
  const first = pool.take(1000 * KiB);
  assert.equal(first.byteLength, 1000 * KiB);
  assert.equal(first.buffer.byteLength, 1024 * KiB, 'rounded up to one of four sizes per power of two');
  assert.ok(pool.made(first.buffer));
  assert.equal(pool.give(first.buffer), true);
  assert.equal(pool.give(first.buffer), false, 'a second give of the same buffer is ignored');
  assert.equal(pool.spareBytes, 1024 * KiB);
  const again = pool.take(900 * KiB);
  assert.equal(again.buffer, first.buffer, 'reused');
  assert.equal(again.byteLength, 900 * KiB);
  assert.equal(pool.spareBytes, 0);
  assert.notEqual(pool.take(900 * KiB).buffer, first.buffer, 'handed out once at a time');
  assert.deepEqual([pool.reused, pool.allocated], [1, 2]);
  // A spare buffer of the next size serves a request too.
  const five = pool.take(5 * 1024 * KiB);
  assert.equal(pool.give(five.buffer), true);
  assert.equal(pool.take(4000 * KiB).buffer, five.buffer);
});

test('the pool keeps at most maxSpareBytes and takes back only buffers of its sizes; the others are freed at once', () => {
  const pool = new SizedBufferPool({ minBytes: 64 * KiB, maxBytes: 1024 * KiB, maxSpareBytes: 256 * KiB });
  const taken = Array.from({ length: 6 }, () => pool.take(64 * KiB));
  assert.deepEqual(taken.map((b) => pool.give(b.buffer)), [true, true, true, true, false, false]);
  assert.equal(pool.spareBytes, 256 * KiB);
  assert.deepEqual(taken.map((b) => b.buffer.byteLength), [64, 64, 64, 64, 0, 0].map((n) => n * KiB), 'past maxSpareBytes: freed, the kept ones whole');
  const odd = new ArrayBuffer(100 * KiB);
  assert.equal(pool.give(odd), false, 'not a pooled size');
  assert.equal(odd.byteLength, 0, 'freed');
  assert.equal(pool.give(new ArrayBuffer(32 * KiB)), false, 'under the smallest size');
  const large = pool.take(2048 * KiB);
  assert.equal(large.buffer.byteLength, 2048 * KiB, 'larger than maxBytes: a buffer of its own, exact');
  pool.take(64 * KiB);
  assert.equal(pool.give(large.buffer), false, 'never pooled');
  assert.equal(large.buffer.byteLength, 0, 'freed');
  taken[4] = pool.take(64 * KiB);
  const detached = pool.take(64 * KiB).buffer as ArrayBuffer;
  structuredClone(detached, { transfer: [detached] });
  assert.equal(pool.give(detached), false, 'a moved buffer is not taken back');
  pool.clear();
  assert.equal(pool.spareBytes, 0);
  assert.ok(taken.slice(0, 2).every((b) => b.buffer.byteLength === 0), 'the spares still waiting are freed at once');
  assert.equal(pool.give(taken[4].buffer), true, 'room again once the spares are let go');
  assert.throws(() => new SizedBufferPool({ minBytes: 1000, maxBytes: 4096, maxSpareBytes: 0 }), { code: 'SPW_ERR_INVALID_ARG' });
});
