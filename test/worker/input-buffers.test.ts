import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RELEASE_MIN_BYTES } from '../../src/runtime/buffer-release.js';
import { inputBuffers } from '../../src/worker/thread-garbage.js';

const never = (): boolean => false;

test('large movable copies are freed by the thread; small ones and shared memory are left to the collector', () => {
  const large = new Float64Array(RELEASE_MIN_BYTES / 8);
  const small = new Uint8Array(RELEASE_MIN_BYTES - 1);
  const shared = new Uint8Array(new SharedArrayBuffer(RELEASE_MIN_BYTES * 2));
  // The same buffer twice (two views) and nested in containers: found once.
  const inputs = [[large, { again: new Uint8Array(large.buffer, 8, 16) }], new Map([['small', small]]), new Set([shared])];
  const { own, leftBytes } = inputBuffers(inputs, [], never);
  assert.deepEqual(own, [large.buffer]);
  assert.equal(leftBytes, small.byteLength + shared.byteLength);
});

test('lent buffers are neither freed nor counted: they go back to the loop', () => {
  const lent = new ArrayBuffer(RELEASE_MIN_BYTES * 4);
  const copy = new ArrayBuffer(RELEASE_MIN_BYTES);
  const { own, leftBytes } = inputBuffers([new Uint8Array(lent), copy, new Uint8Array(lent, 10)], [lent], never);
  assert.deepEqual(own, [copy]);
  assert.equal(leftBytes, 0);
});

test('a buffer that cannot move is left to the collector, counted', () => {
  const pinned = new ArrayBuffer(RELEASE_MIN_BYTES * 2);
  const free = new ArrayBuffer(RELEASE_MIN_BYTES * 2);
  const { own, leftBytes } = inputBuffers({ pinned, free }, [], (b) => b === pinned);
  assert.deepEqual(own, [free]);
  assert.equal(leftBytes, pinned.byteLength);
});

test('no binary inputs: nothing to free or count', () => {
  assert.deepEqual(inputBuffers([1, 'two', { three: [3] }, undefined], [], never), { own: [], leftBytes: 0 });
});
