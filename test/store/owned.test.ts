import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Readable } from 'node:stream';
import fc from 'fast-check';
import type { Lease, SpillStore } from '../../src/index.js';
import { SlowTier } from '../../src/testing/index.js';
import { checkInvariants } from '../../src/store/spill-store.js';
import { KiB, MiB, f64, openStore } from '../helpers/store.js';

const detached = (v: Float64Array): boolean => v.buffer.byteLength === 0;

test('an owned value is freed when deleted, overwritten or spilled; a spilled one reads back whole', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 16 * MiB });
  const a = f64(256 * KiB, 1);
  const b = f64(256 * KiB, 2);
  const c = f64(256 * KiB, 3);
  store.set('a', a, { owned: true });
  store.set('b', b, { owned: true });
  store.set('c', c, { owned: true });
  assert.equal(store.delete('a'), true);
  assert.ok(detached(a), 'deleted');
  store.set('b', f64(8, 9));
  assert.ok(detached(b), 'overwritten');
  assert.ok((await store.evict()) >= 256 * KiB);
  assert.ok(detached(c), 'spilled and dropped');
  assert.equal(store.stats().counters.freedBytes, 3 * 256 * KiB);
  assert.deepEqual(await store.get('c'), f64(256 * KiB, 3));
});

test('an owned value in an array or object is freed buffer by buffer', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 16 * MiB });
  const parts = [f64(128 * KiB, 1), f64(128 * KiB, 2)];
  const small = f64(1 * KiB, 3);
  store.set('k', { parts, small, n: 5 }, { owned: true });
  await store.evict();
  assert.ok(parts.every(detached));
  assert.ok(!detached(small), 'buffers under 64 KiB are left to the collector');
  assert.deepEqual(await store.get('k'), { parts: [f64(128 * KiB, 1), f64(128 * KiB, 2)], small: f64(1 * KiB, 3), n: 5 });
});

test('values not set owned, and owned ones handed out, are never freed by the store', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 16 * MiB });
  const plain = f64(256 * KiB, 1);
  store.set('plain', plain);
  store.delete('plain');
  assert.ok(!detached(plain), 'not owned');

  const gotten = f64(256 * KiB, 2);
  store.set('got', gotten, { owned: true });
  assert.equal(await store.get('got'), gotten);
  store.delete('got');
  assert.ok(!detached(gotten), 'get handed it out');

  const peeked = f64(256 * KiB, 3);
  store.set('peeked', peeked, { owned: true });
  assert.equal(store.peek('peeked'), peeked);
  await store.evict();
  assert.ok(!detached(peeked), 'peek handed it out');

  const leased = f64(256 * KiB, 4);
  store.set('leased', leased, { owned: true });
  const lease = await store.acquire(['leased']);
  lease.release();
  store.delete('leased');
  assert.ok(!detached(leased), 'a lease that is not transient handed it out');

  const streamed = f64(256 * KiB, 5);
  store.set('streamed', streamed, { owned: true });
  const stream = store.createReadStream('streamed');
  for await (const chunk of stream as Readable) assert.ok((chunk as Uint8Array).byteLength > 0);
  store.delete('streamed');
  assert.ok(!detached(streamed), 'served from memory: a socket may still be sending from it');
  assert.equal(store.stats().counters.freedBytes, 0);
});

test('a transient lease keeps an owned value whole while held; the value is freed once let go after', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 16 * MiB });
  const v = f64(256 * KiB, 1);
  store.set('k', v, { owned: true });
  const lease = await store.acquire(['k'], { transient: true });
  assert.equal(await store.evict(), 0, 'pinned');
  store.delete('k');
  assert.ok(!detached(v), 'deleted while pinned: the holder is still reading it');
  assert.deepEqual(lease.get('k'), f64(256 * KiB, 1));
  lease.release();

  const w = f64(256 * KiB, 2);
  store.set('w', w, { owned: true });
  const again = await store.acquire(['w'], { transient: true });
  again.release();
  await store.evict();
  assert.ok(detached(w), 'still owned after a transient lease');
});

test('a value read back for transient leases only is owned again; one a reader may keep is not', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 16 * MiB });
  // Owned when set, so that a spill frees them and every read below is a read from disk.
  for (const [key, seed] of [['t', 1], ['g', 2], ['n', 3]] as const) store.set(key, f64(256 * KiB, seed), { owned: true });
  await store.evict();

  const transient = await store.acquire(['t'], { transient: true });
  const read = transient.get<Float64Array>('t');
  assert.deepEqual(read, f64(256 * KiB, 1));
  transient.release();
  await store.evict();
  assert.ok(detached(read), 'read for a transient lease only: freed when spilled again');

  // One read shared by a transient lease and a get: the get's caller may keep the value.
  const [shared, got] = await Promise.all([store.acquire(['g'], { transient: true }), store.get('g')]);
  assert.equal(shared.get('g'), got, 'one read, one object');
  shared.release();
  await store.evict();
  assert.ok(!detached(got as Float64Array), 'handed out by get: never freed by the store');

  const kept = await store.acquire(['n']);
  const value = kept.get<Float64Array>('n');
  kept.release();
  await store.evict();
  assert.ok(!detached(value), 'read for a lease that is not transient: never freed by the store');
  assert.deepEqual(value, f64(256 * KiB, 3));
});

test('an owned value deleted while its spill is being written is not freed under the write', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 16 * MiB, wrap: (disk) => new SlowTier(disk, 50) });
  const v = f64(256 * KiB, 1);
  store.set('k', v, { owned: true });
  const evicted = store.evict();
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(store.stats().spilling.count, 1, 'the write is in flight');
  store.delete('k');
  assert.ok(!detached(v));
  await evicted;
  await store.flush();
  assert.equal(store.has('k'), false);
  assert.deepEqual(store[checkInvariants](), []);
});

type Op =
  | { op: 'set'; key: number; n: number }
  | { op: 'get' | 'delete'; key: number }
  | { op: 'acquire'; keys: number[]; transient: boolean }
  | { op: 'release'; lease: number }
  | { op: 'evict' }
  | { op: 'flush' };

const KEYS = ['a', 'b', 'c', 'd'];
const make = (n: number): Float64Array => f64(((n % 3) + 1) * 64 * KiB, n);

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('set' as const), key: fc.nat(KEYS.length - 1), n: fc.nat(1000) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constantFrom('get' as const, 'delete' as const), key: fc.nat(KEYS.length - 1) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('acquire' as const), keys: fc.array(fc.nat(KEYS.length - 1), { minLength: 1, maxLength: 2 }), transient: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('release' as const), lease: fc.nat(5) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('evict' as const) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('flush' as const) }) },
);

test('model: with owned values, nothing handed out or pinned is ever freed, and every value reads back whole', async (t) => {
  let freed = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(opArb, { minLength: 10, maxLength: 50, size: 'max' }), async (ops) => {
      const { store } = await openStore(t, { memoryLimit: 1 * MiB });
      const model = new Map<string, number>();
      // Values the test was given (get, a lease that is not transient): the store must never free them.
      const handedOut: Float64Array[] = [];
      const leases: { lease: Lease; values: Float64Array[] }[] = [];
      try {
        for (const step of ops) {
          await apply(store, model, handedOut, leases, step);
          assert.deepEqual(store[checkInvariants](), [], JSON.stringify(step));
          for (const v of handedOut) assert.ok(!detached(v), `a value handed out was freed, after ${JSON.stringify(step)}`);
          for (const { lease, values } of leases) if (!lease.released) for (const v of values) assert.ok(!detached(v), 'a leased value was freed');
        }
        for (const { lease } of leases) lease.release();
        await store.flush();
        for (const [key, n] of model) assert.deepEqual(await store.get(key), make(n), key);
        freed += store.stats().counters.freedBytes;
      } finally {
        await store.close();
      }
    }),
    { numRuns: 60 },
  );
  assert.ok(freed > 0, 'the runs freed owned values');
});

async function apply(store: SpillStore, model: Map<string, number>, handedOut: Float64Array[], leases: { lease: Lease; values: Float64Array[] }[], step: Op): Promise<void> {
  switch (step.op) {
    case 'set':
      store.set(KEYS[step.key], make(step.n), { owned: true });
      model.set(KEYS[step.key], step.n);
      return;
    case 'get': {
      const key = KEYS[step.key];
      const n = model.get(key);
      if (n === undefined) return void (await assert.rejects(store.get(key)));
      const value = (await store.get(key)) as Float64Array;
      assert.deepEqual(value, make(n));
      handedOut.push(value);
      return;
    }
    case 'delete':
      assert.equal(store.delete(KEYS[step.key]), model.delete(KEYS[step.key]));
      return;
    case 'acquire': {
      const keys = [...new Set(step.keys.map((i) => KEYS[i]))];
      if (keys.some((k) => !model.has(k))) return void (await assert.rejects(store.acquire(keys, { transient: step.transient })));
      const lease = await store.acquire(keys, { transient: step.transient });
      const values = keys.map((k) => lease.get<Float64Array>(k));
      keys.forEach((k, i) => assert.deepEqual(values[i], make(model.get(k) as number)));
      if (!step.transient) handedOut.push(...values);
      leases.push({ lease, values });
      return;
    }
    case 'release':
      leases[step.lease % Math.max(1, leases.length)]?.lease.release();
      return;
    case 'evict':
      await store.evict();
      return;
    case 'flush':
      await store.flush();
      return;
  }
}
