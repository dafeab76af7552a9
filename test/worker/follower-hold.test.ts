import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FollowerHold, HOLD_MIN_BYTES } from '../../src/worker/follower-hold.js';
import { waitFor } from '../helpers/wait.js';

const queue = (...inputs: string[][]): { values(): Iterable<{ inputs: string[] }> } => ({ values: () => inputs.map((i) => ({ inputs: i })) });

test('a hold lasts until a queued task reads the result', () => {
  const hold = new FollowerHold(60_000, () => assert.fail('no expiry'));
  hold.start('out-1', HOLD_MIN_BYTES);
  assert.equal(hold.holding(queue()), true);
  assert.equal(hold.holding(queue(['other'])), true);
  assert.equal(hold.holding(queue(['other'], ['x', 'out-1'])), false);
  assert.equal(hold.holding(queue()), false, 'ended for good');
});

test('check says when the reader has arrived, once', () => {
  const hold = new FollowerHold(60_000, () => assert.fail('no expiry'));
  assert.equal(hold.check(queue(['out-1'])), 'none');
  hold.start('out-1', HOLD_MIN_BYTES);
  assert.equal(hold.check(queue(['other'])), 'holding');
  assert.deepEqual(hold.check(queue(['x'], ['out-1'])), { inputs: ['out-1'] });
  assert.equal(hold.check(queue(['out-1'])), 'none');
});

test('a hold ends by itself after its limit, and asks for a pump', async () => {
  let expired = 0;
  const hold = new FollowerHold(20, () => expired++);
  hold.start('out-1', HOLD_MIN_BYTES);
  assert.equal(hold.holding(queue()), true);
  await waitFor(() => expired === 1, 'expiry');
  assert.equal(hold.holding(queue()), false);
});

test('small results and a closed hold hold nothing', () => {
  const hold = new FollowerHold(60_000, () => assert.fail('no expiry'));
  hold.start('small', HOLD_MIN_BYTES - 1);
  assert.equal(hold.holding(queue()), false);
  hold.start('big', HOLD_MIN_BYTES);
  hold.clear();
  assert.equal(hold.holding(queue()), false);
});
