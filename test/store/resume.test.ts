import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgumentError, TierWrapper, type Tier, type WriteSource } from '../../src/index.js';
import { FaultyTier } from '../../src/testing/index.js';
import { checkInvariants, sampleMemory } from '../../src/store/spill-store.js';
import { resolveOptions } from '../../src/store/options.js';
import { resumeAtTarget } from '../../src/worker/options.js';
import { KiB, MiB, f64, openStore } from '../helpers/store.js';
import { waitFor } from '../helpers/wait.js';

/** Holds every write until the test lets it through, one at a time, in arrival order. */
class GatedTier extends TierWrapper {
  readonly #waiting: (() => void)[] = [];
  get waiting(): number {
    return this.#waiting.length;
  }
  release(): void {
    const next = this.#waiting.shift();
    assert.ok(next !== undefined, 'no write is waiting');
    next();
  }
  releaseAll(): void {
    while (this.#waiting.length > 0) this.release();
  }
  override async write(id: number, source: WriteSource, byteLength: number): Promise<void> {
    await new Promise<void>((resolve) => this.#waiting.push(resolve));
    return this.inner.write(id, source, byteLength);
  }
}

const VALUE = 128 * KiB; // over the batch size: one write per value

/** A 2 MiB store on a gated disk, filled until it pauses, with the writes it started held. */
async function pausedStore(t: Parameters<typeof openStore>[0], resume?: number) {
  let gate: GatedTier | undefined;
  const { store } = await openStore(t, {
    memoryLimit: 2 * MiB,
    resume,
    spillConcurrency: 4,
    wrap: (disk: Tier) => (gate = new GatedTier(disk)),
  });
  t.after(() => gate?.releaseAll());
  const held = gate as GatedTier | undefined; // assigned by `wrap`, which TypeScript cannot see
  assert.ok(held !== undefined, 'the store did not wrap its disk');
  let i = 0;
  while (!store.paused) store.set(`k${i++}`, f64(VALUE, i));
  await waitFor(() => held.waiting >= 2, 'two writes held');
  return { store, gate: held, count: i };
}

test('resume defaults to an eighth of the way from pause down to target', () => {
  const opts = resolveOptions({ memoryLimit: 1000 * KiB });
  assert.equal(opts.resumeBytes, Math.floor(0.775 * 1000 * KiB));
  const custom = resolveOptions({ memoryLimit: 1000, target: 0.4, pause: 0.9 });
  assert.equal(custom.resumeBytes, Math.floor((0.9 - 0.5 / 8) * 1000));
  assert.equal(resolveOptions({ memoryLimit: 1000, resume: 0.7 }).resumeBytes, 700);
  assert.equal(resolveOptions({ memoryLimit: 1000, resume: 0.6 }).resumeBytes, 600, 'target itself is allowed');
  assert.equal(resolveOptions({ memoryLimit: 1000, target: false }).resumeBytes, 800, 'no target: the pause level');
  assert.equal(resolveOptions({ memoryLimit: 1000, pause: false }).resumeBytes, Infinity, 'never paused');
});

test('a resume level under target, over pause or not a fraction is rejected at open', () => {
  for (const resume of [0.5, 0.85, 0, -1, 2, Number.NaN, false as unknown as number, '0.7' as unknown as number]) {
    assert.throws(() => resolveOptions({ memoryLimit: 1000, resume }), (err: unknown) => {
      assert.ok(err instanceof InvalidArgumentError, String(err));
      assert.equal(err.code, 'SPW_ERR_INVALID_ARG');
      return true;
    }, `resume ${String(resume)}`);
  }
});

test('a paused store resumes once a write lands, while others are still in flight', async (t) => {
  const { store, gate } = await pausedStore(t);
  assert.ok(store.resumeBytes > store.targetBytes && store.resumeBytes < store.pauseBytes);
  gate.release();
  await waitFor(() => !store.paused, 'a resume after one write landed');
  assert.ok(store.residentBytes <= store.resumeBytes, `${store.residentBytes} > ${store.resumeBytes}`);
  // Resumed before memory was back at target: the other writes have not landed yet.
  assert.ok(store.residentBytes > store.targetBytes, 'resumed only at target');
  assert.ok(store.stats().spilling.bytes > 0, 'no write left in flight');
  gate.releaseAll();
  await store.flush();
});

test('with resume at target, a paused store waits for every write it started', async (t) => {
  const { store, gate } = await pausedStore(t, 0.6);
  assert.equal(store.resumeBytes, store.targetBytes);
  let inFlight = store.stats().spilling.count;
  assert.ok(inFlight >= 2, `${inFlight} writes in flight`);
  while (inFlight > 1) {
    gate.release();
    inFlight--;
    await waitFor(() => store.stats().spilling.count === inFlight, 'the write to land');
    assert.equal(store.paused, true, `resumed with ${inFlight} writes in flight`);
  }
  const resumed = store.whenResumed();
  gate.release();
  await resumed;
  assert.ok(store.residentBytes <= store.targetBytes);
});

test('every value set while the store paused and resumed early reads back', async (t) => {
  const { store, gate, count } = await pausedStore(t);
  const release = setInterval(() => gate.releaseAll(), 2);
  t.after(() => clearInterval(release));
  let peak = 0;
  for (let i = count; i < count + 40; i++) {
    if (store.paused) await store.whenResumed();
    store.set(`k${i}`, f64(VALUE, i + 1));
    peak = Math.max(peak, store.residentBytes);
  }
  await store.flush();
  assert.ok(peak <= store.pauseBytes + VALUE + 64, `peak ${peak} past the pause level`);
  for (let i = 0; i < count + 40; i++) assert.equal(((await store.get(`k${i}`)) as Float64Array)[0], i + 1);
});

test('a worker keeps resuming at its target', () => {
  assert.equal(resumeAtTarget(undefined, undefined), 0.6);
  assert.equal(resumeAtTarget(0.5, 0.9), 0.5);
  assert.equal(resumeAtTarget(0.9, 0.8), 0.8, 'never over pause');
  assert.equal(resumeAtTarget(false, 0.8), undefined);
  assert.equal(resumeAtTarget(0.6, false), undefined);
});

/** Resolves true once the store resumes, false if it is still paused after `ms`. */
function resumesWithin(store: { whenResumed(): Promise<void> }, ms: number): Promise<boolean> {
  return Promise.race([store.whenResumed().then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms))]);
}

test('a paused store resumes when the pump drops values that have a copy and then stops at a write that failed', async (t) => {
  let failing = false;
  const { store } = await openStore(t, {
    memoryLimit: 100 * KiB,
    retryDelayMs: 60_000,
    wrap: (disk) => new FaultyTier(disk, { failWrite: () => (failing ? 'ENOSPC' : undefined) }),
  });
  store.on('error', () => undefined);
  // k1: on disk, then read back (in memory with a copy below: free to drop).
  store.set('k1', f64(8 * KiB, 1), { size: 20 * KiB });
  await store.evict();
  store.set('d1', f64(8 * KiB, 2), { size: 30 * KiB });
  await store.get('k1');
  // d1's write fails: it stays in memory and waits a minute for its retry.
  failing = true;
  assert.equal(await store.evict(1), 0);
  assert.equal(store.where('d1'), 'memory');
  // Over pause: the pump drops k1 (free), then finds nothing it may write now.
  store.set('d2', f64(8 * KiB, 3), { size: 35 * KiB });
  assert.deepEqual(store[checkInvariants](), []);
  assert.equal(store.where('k1'), 'disk');
  assert.ok(store.residentBytes <= store.resumeBytes, `${store.residentBytes} <= ${store.resumeBytes}`);
  assert.equal(await resumesWithin(store, 300), true, 'still paused with the resident values under resume');
});

test('a paused store resumes when the pump drops values that have a copy and then meets only a value it cannot encode', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 1024 * KiB });
  store.on('error', () => undefined);
  store.set('k1', f64(8 * KiB, 1), { size: 200 * KiB });
  await store.evict();
  await store.get('k1');
  // Over pause (819 KiB): the pump drops k1, then tries fn, which holds a function.
  store.set('fn', { f: () => 1, data: f64(8 * KiB, 2) }, { size: 650 * KiB });
  await store.flush();
  assert.deepEqual(store[checkInvariants](), []);
  assert.equal(store.where('k1'), 'disk');
  assert.ok(store.residentBytes <= store.resumeBytes, `${store.residentBytes} <= ${store.resumeBytes}`);
  assert.equal(await resumesWithin(store, 300), true, 'still paused with the resident values under resume');
});

test('a store paused on RSS resumes when only values it cannot encode are left (spilling cannot lower RSS)', async (t) => {
  // The monitor is on (so RSS counts) but its timer never fires: the test feeds readings.
  const { store } = await openStore(t, { memoryLimit: 100 * MiB, monitorIntervalMs: 2_000_000_000 });
  store.on('error', () => undefined);
  const reasons: string[] = [];
  store.on('unspillable', (event: { reason: string }) => reasons.push(event.reason));
  store.set('fn', { callback: () => 1 }, { size: 1 * MiB });
  await store.evict(); // CodecError: it stays in memory for good
  assert.equal(store.where('fn'), 'memory');
  assert.deepEqual(store[checkInvariants](), []);
  // Memory the store does not manage holds RSS over pause (80 MiB).
  for (let i = 0; i < 5; i++) {
    store[sampleMemory](85 * MiB);
    await store.flush();
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal(store.paused, false, 'paused for good: nothing it holds can be spilled');
  assert.ok(reasons.includes('unmanaged'), `and it says why: ${reasons.join(', ')}`);
});

test('with pause under target, spilling starts at pause: a store paused there resumes once it has spilled', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 1000 * KiB, target: 0.9, pause: 0.5 });
  assert.equal(store.targetBytes, store.pauseBytes);
  for (let i = 0; i < 8; i++) store.set(`k${i}`, f64(80 * KiB, i)); // 640 KiB: over pause (500), under target (900)
  assert.equal(store.paused, true);
  await store.flush();
  assert.equal(await resumesWithin(store, 1000), true, `paused for good: resident ${store.residentBytes}, resume ${store.resumeBytes}`);
  for (let i = 0; i < 8; i++) assert.deepEqual(await store.get(`k${i}`), f64(80 * KiB, i));
});
