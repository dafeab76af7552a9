import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgumentError, SpillStore, TierReadError } from '../../src/index.js';
import { FaultyTier } from '../../src/testing/index.js';
import { resolveOptions } from '../../src/store/options.js';
import { checkInvariants } from '../../src/store/spill-store.js';
import { MiB, openStore } from '../helpers/store.js';
import { onCleanup } from '../helpers/cleanup.js';
import { tempDir } from '../helpers/temp-dir.js';

// A string is an Iterable<string>, so TypeScript accepts acquire('key'): the store leased
// the key's characters (or failed with KeyNotFoundError for one of them).
test('acquire() of a string, or of something not iterable, is refused with InvalidArgumentError', async (t) => {
  const { store } = await openStore(t);
  for (const k of ['a', 'b', 'c', 'abc']) store.set(k, k);
  for (const bad of ['abc', 'zz', undefined, null, 42]) {
    await assert.rejects(store.acquire(bad as unknown as string[]), (err: unknown) => {
      assert.ok(err instanceof InvalidArgumentError, `${String(bad)}: ${String(err)}`);
      assert.equal(err.code, 'SPW_ERR_INVALID_ARG');
      return true;
    });
  }
  assert.equal(store.stats().pinned.count, 0, 'nothing stays pinned');
  using lease = await store.acquire(['abc']);
  assert.equal(lease.get('abc'), 'abc');
  const fromSet = await store.acquire(new Set(['a', 'b']));
  assert.deepEqual(fromSet.keys, ['a', 'b']);
  fromSet.release();
  assert.deepEqual(store[checkInvariants](), []);
});

// docs/metrics.md: readErrors, like every failure counter, is "also reported as an `error`
// event". A checksum failure was; a tier that failed to read was only counted.
test('a failed tier read is reported as an error event, as its counter says', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB, wrap: (disk) => new FaultyTier(disk, { failRead: () => 'EIO' }) });
  const errors: unknown[] = [];
  store.on('error', (err) => errors.push(err));
  store.set('bad', 'a');
  await store.evict();
  await assert.rejects(Promise.all([store.get('bad'), store.get('bad')]), TierReadError);
  assert.equal(store.stats().counters.readErrors, 1);
  assert.equal(errors.length, 1, 'one event for the one failed read');
  assert.ok(errors[0] instanceof TierReadError && errors[0].code === 'SPW_ERR_TIER_READ');
  assert.equal(store.has('bad'), true, 'the key stays');
});

// docs/configuration.md: "Rejected at open with InvalidArgumentError: ... fractions outside (0, 1]".
test('a resume level that is not a fraction is rejected even with pause off', async (t) => {
  const directory = await tempDir(t);
  for (const resume of [2, -1, 0, Number.NaN, '0.7' as unknown as number]) {
    assert.throws(() => resolveOptions({ memoryLimit: 1000, pause: false, resume }), InvalidArgumentError, `resume ${String(resume)}`);
    const opened = SpillStore.open({ memoryLimit: 1000, pause: false, resume, monitorIntervalMs: 0, directory });
    opened.then((store) => onCleanup(t, () => store.close()), () => undefined);
    await assert.rejects(opened, InvalidArgumentError);
  }
  assert.equal(resolveOptions({ memoryLimit: 1000, pause: false, resume: 0.7 }).resumeBytes, Infinity, 'a fraction is fine, and unused');
});

// evict(NaN) compared false with every running total: it evicted everything, silently.
test('evict() of a byte count that is not a non-negative number is refused with InvalidArgumentError', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  for (let i = 0; i < 4; i++) store.set(`k${i}`, new Float64Array(8192));
  for (const bad of [Number.NaN, -1, '1 KiB', null]) {
    await assert.rejects(store.evict(bad as unknown as number), InvalidArgumentError, String(bad));
  }
  for (let i = 0; i < 4; i++) assert.equal(store.where(`k${i}`), 'memory', 'nothing was evicted');
  assert.equal(await store.evict(0), 0);
  assert.ok((await store.evict()) > 0);
});
