import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { GarbageCollector, collectGarbage } from '../../src/worker/collect.js';

describe('garbage collection on demand', () => {
  test('collectGarbage is available and frees an unreachable buffer', async () => {
    assert.equal(typeof collectGarbage, 'function');
    const ref = await (async () => new WeakRef(new Float64Array(1024 * 1024)))();
    await tick(); // a WeakRef target survives the job that created it
    collectGarbage?.();
    assert.equal(ref.deref(), undefined);
  });

  test('the collector runs once the garbage estimate reaches its threshold, at most once per interval', () => {
    let garbage = 10;
    let collected = 0;
    const collector = new GarbageCollector([{ garbageBytes: () => garbage, collected: () => collected++ }], 100, 60_000, 60_000);
    try {
      collector.check();
      assert.equal(collector.collections, 0, 'under the threshold');
      garbage = 100;
      collector.check();
      assert.equal(collector.collections, 1);
      assert.equal(collected, 1, 'sources hear of it');
      collector.check();
      assert.equal(collector.collections, 1, 'not again within the interval');
    } finally {
      collector.stop();
    }
  });

  test('garbage estimates of several sources add up', () => {
    const collector = new GarbageCollector([{ garbageBytes: () => 60 }, { garbageBytes: () => 40 }], 100, 0, 60_000);
    try {
      collector.check();
      assert.equal(collector.collections, 1);
    } finally {
      collector.stop();
    }
  });
});
