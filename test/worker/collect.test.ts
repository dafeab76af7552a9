import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { test } from 'node:test';
import { collectGarbage } from '../../src/runtime/garbage-collection.js';

test('collectGarbage is available and frees an unreachable buffer', async () => {
  assert.equal(typeof collectGarbage, 'function');
  const ref = await (async () => new WeakRef(new Float64Array(1024 * 1024)))();
  await tick(); // a WeakRef target survives the job that created it
  collectGarbage?.();
  assert.equal(ref.deref(), undefined);
});
