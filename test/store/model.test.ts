import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import fc from 'fast-check';
import { DiskTier, SpillStore, type Lease } from '../../src/index.js';
import { CompressedMemoryTier } from '../../src/tiers/compressed-memory.js';
import { checkInvariants } from '../../src/store/spill-store.js';
import { KiB, f64 } from '../helpers/store.js';
import { tempDir } from '../helpers/temp-dir.js';

type Kind = 'str' | 'f64' | 'obj';
type Op =
  | { op: 'set'; key: number; kind: Kind; n: number }
  | { op: 'get' | 'peek' | 'delete'; key: number }
  | { op: 'acquire'; keys: number[] }
  | { op: 'release'; lease: number }
  | { op: 'evict'; bytes: number | undefined }
  | { op: 'flush' };

const KEYS = ['a', 'b/../c', '', 'd\u0000', 'e', 'f'];

function make(kind: Kind, n: number): unknown {
  switch (kind) {
    case 'str':
      return `s${n}`.repeat((n % 40) + 1);
    case 'f64':
      return f64(((n % 16) + 1) * KiB, n);
    case 'obj':
      return { n, tags: [n, `t${n}`], data: f64(((n % 4) + 1) * KiB, n) };
  }
}

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('set' as const), key: fc.nat(KEYS.length - 1), kind: fc.constantFrom<Kind>('str', 'f64', 'obj'), n: fc.nat(1000) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constantFrom('get' as const, 'peek' as const, 'delete' as const), key: fc.nat(KEYS.length - 1) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('acquire' as const), keys: fc.array(fc.nat(KEYS.length - 1), { minLength: 1, maxLength: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('release' as const), lease: fc.nat(5) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('evict' as const), bytes: fc.option(fc.nat(40 * KiB), { nil: undefined }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('flush' as const) }) },
);

test('model: the store behaves like a Map and keeps its invariants after every step', async (t) => {
  const parent = await tempDir(t);
  // Values here are 1-16 KiB, under the default weakRefBytes: they are let go outright.
  await runModel(t, () => SpillStore.open({ memoryLimit: 32 * KiB, monitorIntervalMs: 0, directory: parent }));
});

test('model: the same with every dropped value weakly tracked (weakRefBytes: 0)', async (t) => {
  const parent = await tempDir(t);
  await runModel(t, () => SpillStore.open({ memoryLimit: 32 * KiB, monitorIntervalMs: 0, directory: parent, weakRefBytes: 0 }));
});

test('model: the same with a chain of tiers (compressed memory, then disk)', async (t) => {
  const parent = await tempDir(t);
  await runModel(t, () =>
    SpillStore.open({
      memoryLimit: 32 * KiB,
      monitorIntervalMs: 0,
      tiers: [new CompressedMemoryTier({ name: 'lz4', capacity: 24 * KiB }), new DiskTier({ directory: parent })],
    }),
  );
});

async function runModel(t: TestContext, open: () => Promise<SpillStore>): Promise<void> {
  const totals = { ops: 0, writes: 0, reads: 0 };
  await fc.assert(
    fc.asyncProperty(fc.array(opArb, { minLength: 10, maxLength: 60, size: 'max' }), async (ops) => {
      const store = await open();
      const model = new Map<string, { kind: Kind; n: number }>();
      const leases: { lease: Lease; keys: string[] }[] = [];
      try {
        for (const step of ops) {
          await apply(store, model, leases, step);
          const problems = store[checkInvariants]();
          assert.deepEqual(problems, [], `after ${JSON.stringify(step)}`);
          assert.equal(store.size, model.size);
          for (const key of KEYS) assert.equal(store.has(key), model.has(key));
          for (const { lease, keys } of leases) {
            for (const key of keys) if (store.has(key) && !lease.released) assert.equal(store.where(key), 'memory', 'a pinned key is never evicted');
          }
        }
        totals.ops += ops.length;
        totals.writes += store.stats().counters.diskWrites;
        totals.reads += store.stats().counters.diskReads;
        for (const { lease } of leases) lease.release();
        await store.flush();
        assert.deepEqual(store[checkInvariants](), []);
        for (const [key, { kind, n }] of model) {
          const value = await store.get(key);
          assert.deepEqual(value, make(kind, n));
          if (typeof value === 'object') assert.equal(await store.get(key), value, 'one in-memory copy');
        }
      } finally {
        await store.close();
      }
    }),
    { numRuns: 100 },
  );
  // The runs must have exercised the disk, not just memory.
  assert.ok(totals.writes > 100 && totals.reads > 5, JSON.stringify(totals));
  t.diagnostic(`model: ${JSON.stringify(totals)}`);
}

async function apply(
  store: SpillStore,
  model: Map<string, { kind: Kind; n: number }>,
  leases: { lease: Lease; keys: string[] }[],
  step: Op,
): Promise<void> {
  switch (step.op) {
    case 'set': {
      const key = KEYS[step.key];
      store.set(key, make(step.kind, step.n));
      model.set(key, { kind: step.kind, n: step.n });
      forgetPins(leases, key);
      return;
    }
    case 'get': {
      const key = KEYS[step.key];
      const expected = model.get(key);
      if (expected === undefined) {
        await assert.rejects(store.get(key));
        return;
      }
      const [a, b] = await Promise.all([store.get(key), store.get(key)]);
      assert.equal(a, b, 'concurrent readers share one copy');
      assert.deepEqual(a, make(expected.kind, expected.n));
      return;
    }
    case 'peek': {
      const key = KEYS[step.key];
      const value = store.peek(key);
      const expected = model.get(key);
      if (value !== undefined) {
        assert.ok(expected !== undefined);
        assert.deepEqual(value, make(expected.kind, expected.n));
      } else if (expected !== undefined) {
        assert.notEqual(store.where(key), undefined);
      }
      return;
    }
    case 'delete': {
      const key = KEYS[step.key];
      assert.equal(store.delete(key), model.delete(key));
      forgetPins(leases, key);
      return;
    }
    case 'acquire': {
      const keys = step.keys.map((i) => KEYS[i]);
      if (keys.some((k) => !model.has(k))) {
        await assert.rejects(store.acquire(keys));
        return;
      }
      const lease = await store.acquire(keys);
      for (const key of keys) {
        const { kind, n } = model.get(key)!;
        assert.deepEqual(lease.get(key), make(kind, n));
        assert.equal(store.peek(key), lease.get(key), 'the lease holds the store copy');
      }
      leases.push({ lease, keys });
      return;
    }
    case 'release':
      leases[step.lease % Math.max(1, leases.length)]?.lease.release();
      return;
    case 'evict':
      assert.ok((await store.evict(step.bytes)) >= 0);
      return;
    case 'flush':
      await store.flush();
      assert.equal(store.stats().spilling.count, 0);
      return;
  }
}

/** A lease pins the version it acquired: a new value under the same key is not pinned. */
function forgetPins(leases: { keys: string[] }[], key: string): void {
  for (const held of leases) held.keys = held.keys.filter((k) => k !== key);
}
