import assert from 'node:assert/strict';
import { test } from 'node:test';
import { niceIncrement } from '../../src/cli/options.js';

test('--thread-nice takes a whole number from 0 to 19', () => {
  assert.equal(niceIncrement('0'), 0);
  assert.equal(niceIncrement('19'), 19);
  for (const bad of ['20', '-1', '2.5', 'ten', '']) assert.throws(() => niceIncrement(bad), /expected/, bad);
});
