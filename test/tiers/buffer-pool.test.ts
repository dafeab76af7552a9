import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BufferPool } from '../../src/tiers/disk/buffer-pool.js';

test('a buffer handed back is lent again, at offset 0 of the same memory', () => {
  const pool = new BufferPool(1024, 4);
  const first = pool.take(100);
  assert.equal(first.byteLength, 100);
  assert.equal(first.byteOffset, 0);
  assert.equal(first.buffer.byteLength, 1024);
  pool.give(first);
  assert.equal(pool.spareCount, 1);
  const second = pool.take(1024);
  assert.equal(second.buffer, first.buffer);
  assert.equal(pool.spareCount, 0);
});

test('a buffer given back twice is kept once (two readers never share memory)', () => {
  const pool = new BufferPool(1024, 4);
  const chunk = pool.take(10);
  pool.give(chunk);
  pool.give(chunk);
  assert.equal(pool.spareCount, 1);
  const a = pool.take(10);
  const b = pool.take(10);
  assert.notEqual(a.buffer, b.buffer);
});

test('buffers the pool did not lend, or views of them from another size, are ignored', () => {
  const pool = new BufferPool(1024, 4);
  pool.give(Buffer.allocUnsafeSlow(1024));
  pool.give(new Uint8Array(new SharedArrayBuffer(1024)));
  assert.equal(pool.spareCount, 0);
});

test('at most maxSpare buffers are kept; the rest are left to the collector', () => {
  const pool = new BufferPool(256, 2);
  const lent = [pool.take(1), pool.take(1), pool.take(1)];
  for (const chunk of lent) pool.give(chunk);
  assert.equal(pool.spareCount, 2);
});

test('asking for more than a buffer holds is a RangeError', () => {
  const pool = new BufferPool(256, 2);
  assert.throws(() => pool.take(257), RangeError);
});
