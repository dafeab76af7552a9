import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClosedError, DiskTier, InvalidArgumentError, SpillStore, TierWrapper, type Tier } from '../../src/index.js';
import { checkInvariants, sampleMemory } from '../../src/store/spill-store.js';
import { KiB, MiB, f64, openStore } from '../helpers/store.js';
import { onCleanup } from '../helpers/cleanup.js';
import { tempDir } from '../helpers/temp-dir.js';

// zict's "avoid useless movement for heavy values": a value larger than the target read
// back from disk was made resident, and the spiller then pushed every other value out
// before dropping it again.
test('a value larger than the target read back is returned, not kept resident; the others stay', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 1 * MiB });
  for (let i = 0; i < 4; i++) store.set(`small${i}`, f64(100 * KiB, i));
  store.set('heavy', f64(800 * KiB, 9));
  await store.flush();
  assert.equal(store.where('heavy'), 'disk');
  const resident = store.residentBytes;
  const evictions = store.stats().counters.evictions;
  let heavy: unknown = await store.get('heavy');
  assert.deepEqual(heavy, f64(800 * KiB, 9));
  await store.flush();
  for (let i = 0; i < 4; i++) assert.equal(store.where(`small${i}`), 'memory', `small${i} stays in memory`);
  assert.equal(store.residentBytes, resident, 'the heavy value is not counted as resident');
  assert.equal(store.stats().counters.evictions, evictions, 'nothing else was dropped');
  // The caller still holds it: a weak reference finds it again, without I/O.
  const reads = store.stats().counters.diskReads;
  assert.equal(await store.get('heavy'), heavy);
  assert.equal(store.peek('heavy'), heavy);
  assert.equal(store.stats().counters.diskReads, reads);
  assert.equal(store.residentBytes, resident);
  // A lease pins it while held; released, it leaves memory again without pushing others out.
  const lease = await store.acquire(['heavy', 'small0']);
  assert.equal(lease.get('heavy'), heavy);
  lease.release();
  await store.flush();
  for (let i = 0; i < 4; i++) assert.equal(store.where(`small${i}`), 'memory');
  assert.equal(store.residentBytes, resident);
  heavy = undefined;
  assert.deepEqual(store[checkInvariants](), []);
});

test('with target off, process memory over `spill` spills down toward `spill`', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 100 * MiB, target: false, spill: 0.5, pause: false });
  for (let i = 0; i < 20; i++) store.set(`k${i}`, f64(1 * MiB, i), { size: 1 * MiB });
  assert.equal(store.residentBytes, 20 * MiB);
  // RSS reads 60 MiB: 10 MiB over `spill`.
  store[sampleMemory](60 * MiB);
  await store.flush();
  const resident = store.residentBytes;
  assert.ok(resident <= 10 * MiB, `spilled down toward spill: ${resident / MiB} MiB still resident`);
  assert.ok(resident >= 8 * MiB, `not everything: ${resident / MiB} MiB resident`);
  assert.equal(store.where('k0'), 'disk', 'least recently used first');
  assert.equal(store.where('k19'), 'memory');
  assert.deepEqual(store[checkInvariants](), []);
});

// Encoding runs on the one thread: the seconds it takes cannot add up to more than the time
// that passed. The timer started before a write's turn on the loop, so each of 64 writes
// started together counted the encoding of every one before it.
test('encode and decode seconds count the work, not the time queued behind other values', async (t) => {
  // No writeMany: each small value is written on its own, as third-party tiers get them.
  const { store } = await openStore(t, {
    memoryLimit: 64 * MiB,
    // No weak references: read back, every value is decoded again.
    weakRefBytes: 1024 * MiB,
    wrap: plainTier,
  });
  // Made here and not kept: read back, they come from disk, not from a weak reference.
  const value = (i: number): unknown[] => Array.from({ length: 6000 }, (_, j) => ({ i, j, s: `v${i}-${j}` }));
  for (let i = 0; i < 64; i++) store.set(`k${i}`, value(i));
  const start = performance.now();
  await store.evict();
  const spillSeconds = (performance.now() - start) / 1000;
  const loadStart = performance.now();
  const back = await Promise.all(Array.from({ length: 64 }, (_, i) => store.get(`k${i}`)));
  const loadSeconds = (performance.now() - loadStart) / 1000;
  const { encodeSeconds, decodeSeconds, diskWrites } = store.stats().counters;
  assert.equal(diskWrites, 64);
  assert.deepEqual(back[7], value(7));
  t.diagnostic(`encode ${encodeSeconds.toFixed(3)} s in ${spillSeconds.toFixed(3)} s; decode ${decodeSeconds.toFixed(3)} s in ${loadSeconds.toFixed(3)} s`);
  assert.ok(encodeSeconds > 0 && encodeSeconds <= spillSeconds, `encodeSeconds ${encodeSeconds} over the ${spillSeconds} s that passed`);
  assert.ok(decodeSeconds > 0 && decodeSeconds <= loadSeconds, `decodeSeconds ${decodeSeconds} over the ${loadSeconds} s that passed`);
});

/** A tier's own methods only (no writeMany, no packed batches). */
function plainTier(tier: Tier): Tier {
  return {
    name: tier.name,
    capacity: tier.capacity,
    open: () => tier.open(),
    write: (id, source, byteLength) => tier.write(id, source, byteLength),
    read: (id, onChunk) => tier.read(id, onChunk),
    createReadStream: (id, range) => tier.createReadStream(id, range),
    delete: (id) => tier.delete(id),
    usage: () => tier.usage(),
    close: () => tier.close(),
  };
}

test('close() while gets of spilled values are in flight: each resolves or rejects with ClosedError, nothing is emitted after', async (t) => {
  const dir = await tempDir(t);
  const disk = new DiskTier({ directory: dir });
  // Reads that take a while, so close() lands in the middle of them.
  const slow = new (class extends TierWrapper {
    override async read(id: number, onChunk?: (chunk: Uint8Array) => void): Promise<Uint8Array> {
      await new Promise((resolve) => setTimeout(resolve, 30));
      return super.read(id, onChunk);
    }
  })(disk);
  const store = await SpillStore.open({ memoryLimit: 64 * MiB, monitorIntervalMs: 0, tiers: [slow] });
  onCleanup(t, () => store.close());
  const errors: unknown[] = [];
  store.on('error', (err) => errors.push(err));
  // Under weakRefBytes: let go outright once spilled, so each get reads.
  for (let i = 0; i < 8; i++) store.set(`k${i}`, f64(32 * KiB, i));
  await store.evict();
  const gets = Promise.allSettled(Array.from({ length: 8 }, (_, i) => store.get(`k${i}`)));
  await store.close();
  const settled = await gets;
  settled.forEach((result, i) => {
    if (result.status === 'fulfilled') assert.deepEqual(result.value, f64(32 * KiB, i));
    else assert.ok(result.reason instanceof ClosedError, `k${i}: ${String(result.reason)}`);
  });
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual(errors, [], 'no error event after close');
});

test('get(null), get(undefined), acquire([null]) and createReadStream(null) are refused with InvalidArgumentError', async (t) => {
  const { store } = await openStore(t);
  store.set('a', 1);
  for (const bad of [null, undefined, 42]) {
    await assert.rejects(store.get(bad as unknown as string), InvalidArgumentError);
    await assert.rejects(store.acquire([bad as unknown as string]), InvalidArgumentError);
    assert.throws(() => store.createReadStream(bad as unknown as string), InvalidArgumentError);
  }
  await assert.rejects(store.acquire(['a', null as unknown as string]), InvalidArgumentError);
  assert.equal(store.stats().pinned.count, 0, 'nothing stays pinned');
  assert.equal(await store.get('a'), 1);
});
