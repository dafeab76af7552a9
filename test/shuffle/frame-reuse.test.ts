/**
 * The send side's buffers come back for reuse: two shuffle services (a worker's side each, one store,
 * one data server) push to each other and to themselves through a real executor thread;
 * later splits lay their frames out in the buffers of earlier ones and copy their inputs into
 * the copies of earlier inputs, and every output still holds exactly the bytes it should.
 */
import assert from 'node:assert/strict';
import { randomFillSync } from 'node:crypto';
import { type TestContext, test } from 'node:test';
import { FrameLoan, FrameSpares, frameSpareCount } from '../../src/shuffle/frame-spares.js';
import { InputSpares, lendableCopy } from '../../src/shuffle/input-spares.js';
import { ShuffleFunctions, type ShuffleRunInfo, type TransferMeta, type UnpackMeta } from '../../src/shuffle/protocol.js';
import { FRAME_BYTES, ShuffleService } from '../../src/shuffle/worker-service.js';
import { DataServer } from '../../src/transfer/server.js';
import { Executor } from '../../src/worker/executor.js';
import { onCleanup } from '../helpers/cleanup.js';
import { runInfoChannel } from '../helpers/shuffle-records.js';
import { MiB, openStore } from '../helpers/store.js';
import { sha256 } from './fixtures/hash.js';
import { slices } from './fixtures/split.js';
import { ext } from '../helpers/suite.js';

const fx = (name: string, file = 'split'): { module: string; name: string } => ({ module: new URL(`./fixtures/${file}${ext}`, import.meta.url).href, name });

test('spare frames: shared memory, at most maxSpares made and kept for good; only the pool\'s own come back', () => {
  const spares = new FrameSpares(1024, 2);
  const first = spares.take(1);
  assert.equal(first.buffers.length, 1);
  assert.equal(first.made, 1, 'none waiting: one made');
  const [a] = first.buffers;
  assert.ok(a instanceof SharedArrayBuffer && a.byteLength === 1024);
  assert.equal(spares.give(new SharedArrayBuffer(1024)), false, 'shared memory the pool did not make is not kept');
  assert.equal(spares.give(new ArrayBuffer(1024)), false, 'nor is an ordinary frame');
  assert.equal(spares.give(a), true);
  assert.equal(spares.give(a), false, 'a buffer given twice is kept once');
  assert.ok(spares.size === 1 && spares.owns(a), 'a waits as a spare');
  const second = spares.take(5);
  assert.deepEqual({ n: second.buffers.length, made: second.made }, { n: 2, made: 1 }, 'the one waiting, then one made: two in all');
  assert.equal(second.buffers[0], a, 'those waiting come first');
  assert.equal(spares.size, 0);
  assert.equal(spares.madeBytes, 2048);
  assert.deepEqual(spares.take(3), { buffers: [], made: 0 }, 'all lent out: none more made');
  // A filled spare comes back from its thread as a new handle over the same memory.
  const handle = structuredClone(second.buffers[1]);
  assert.notEqual(handle, second.buffers[1]);
  assert.equal(spares.give(handle), false, 'unknown until adopted');
  spares.adopt(handle);
  assert.equal(spares.give(handle), true);
  assert.equal(spares.take(1).buffers[0], handle);
  assert.throws(() => new FrameSpares(0, 1), { code: 'SPW_ERR_INVALID_ARG' });
  assert.throws(() => new FrameSpares(1024, -1), { code: 'SPW_ERR_INVALID_ARG' });
});

test('a loaned frame comes back once the transfer is done and no push holds it; a frame whose push to a peer failed never does', () => {
  const spares = new FrameSpares(64, 8);
  const { buffers } = spares.take(3);
  const [a, b, c] = buffers.map((buffer) => new Uint8Array(buffer).subarray(0, 40));
  const loan = new FrameLoan(spares, [[a, b], [c]]);
  const pushA = loan.push(a);
  const pushB = loan.push(b);
  const pushC = loan.push(c);
  pushB(false);
  pushC(true);
  assert.equal(spares.size, 0, 'nothing comes back before the transfer is done with its frames');
  loan.end();
  assert.deepEqual(spares.take(1).buffers, [c.buffer], 'a is still held, b failed');
  pushA(true);
  pushA(true);
  assert.equal(spares.size, 1, 'a comes back once its push is done, once');
  assert.equal(spares.take(1).buffers[0], a.buffer);
  assert.equal(spares.madeBytes, 2 * 64, 'b, lost, is no longer counted: the pool may make another');
  assert.equal(spares.take(8).made, 6, 'up to maxSpares again');

  // Ordinary frames the thread allocated (sized to their records, or no spare left) are freed
  // at once, but for one whose push failed: its socket write may still read it.
  const [d, e, f] = [64, 32, 64].map((n) => new Uint8Array(n));
  const second = new FrameLoan(spares, [[d, e, f]]);
  second.push(f)(false);
  second.end();
  assert.equal(spares.size, 0, 'not the pool\'s: not kept');
  assert.deepEqual([d, e, f].map((x) => x.buffer.byteLength), [0, 0, 64], 'freed, but the failed one');
});

test('the frame spares a worker keeps: a 64th of its limit, up to four frames within a 16th, at most 32', () => {
  assert.deepEqual([32, 64, 128, 256, 1024, 4096, 8192, 65536].map((mib) => frameSpareCount(mib * MiB, 4 * MiB)), [0, 1, 2, 4, 4, 16, 32, 32]);
});

test('input spares: taken by exact size, bounded in bytes with the oldest let go; a lendable copy is exact and of the same type', async () => {
  const spares = new InputSpares(300_000);
  const [a, b, c] = [100_000, 100_000, 200_000].map((n) => new ArrayBuffer(n));
  assert.equal(spares.give(a), true);
  assert.equal(spares.give(a), false, 'a buffer given twice is kept once');
  assert.equal(spares.give(b), true);
  const large = new ArrayBuffer(400_000);
  assert.equal(spares.give(large), false, 'larger than the bound: never kept');
  assert.equal(large.byteLength, 0, 'and freed at once');
  assert.equal(spares.give(c), true);
  assert.equal(spares.bytes, 300_000, 'the oldest (a) let go');
  assert.equal(a.byteLength, 0, 'and freed');
  assert.ok(spares.has(200_000) && !spares.has(150_000));
  assert.equal(spares.take(100_000), b);
  assert.equal(spares.take(200_000), c);
  assert.notEqual(spares.take(200_000), c, 'none spare: a new one');
  assert.deepEqual({ reused: spares.reused, allocated: spares.allocated }, { reused: 2, allocated: 1 });
  const input = Buffer.from(randomFillSync(new Uint8Array(100_000)));
  const copy = await lendableCopy(input, spares);
  assert.ok(copy !== undefined && copy.value instanceof Uint8Array && !Buffer.isBuffer(copy.value), 'a Buffer is copied as a Uint8Array, as a clone makes it');
  assert.equal(copy.value.buffer, copy.buffer);
  assert.ok(Buffer.from(copy.buffer).equals(input));
  const f64 = new Float64Array(randomFillSync(new Uint8Array(160_000)).buffer, 80_000, 10_000);
  const f64Copy = await lendableCopy(f64, spares);
  assert.ok(f64Copy?.value instanceof Float64Array && f64Copy.value.byteOffset === 0 && f64Copy.buffer.byteLength === f64.byteLength);
  assert.deepEqual(f64Copy.value, f64);
  assert.equal(await lendableCopy(new Uint8Array(1000), spares), undefined, 'small: cloned as ever');
  assert.equal(await lendableCopy(new Uint8Array(new SharedArrayBuffer(100_000)), spares), undefined, 'shared memory is not copied');
  assert.equal(await lendableCopy([new Uint8Array(100_000)], spares), undefined, 'not one view: threadInputs copies it');
});

/** Two workers' shuffle services on 1 GiB stores, pushing to each other through one executor thread. */
async function twoWorkers(t: TestContext): Promise<ShuffleService[]> {
  const executor = new Executor(1);
  onCleanup(t, () => executor.close());
  const services: ShuffleService[] = [];
  const addresses: { host: string; port: number }[] = [];
  // Large enough a memory limit that the receiver keeps views of local frames across splits.
  // 1 GiB workers keep 4 spare frames and 16 MiB of input copies (a 64th of the limit each).
  const stores = [(await openStore(t, { memoryLimit: 1024 * MiB })).store, (await openStore(t, { memoryLimit: 1024 * MiB })).store];
  for (const [w, store] of stores.entries()) {
    const server = await DataServer.listen(store, { host: '127.0.0.1', onRequest: (body, payload) => services[w].onRequest(body, payload) });
    onCleanup(t, () => server.close());
    addresses.push(server.address);
  }
  const info: ShuffleRunInfo = { run: 1, workers: addresses, done: [] };
  const channel = runInfoChannel(info);
  for (const [w, store] of stores.entries()) {
    services.push(new ShuffleService({ store, executor, channel: () => channel, token: undefined, self: addresses[w], retryMs: 5_000 }));
  }
  t.after(() => services.forEach((s) => s.close()));
  return services;
}

/** Worker w splits inputs w, w + 2, w + 4 ...; both at once. */
async function splitAll(services: ShuffleService[], inputs: Uint8Array[], P: number): Promise<void> {
  await Promise.all(
    services.map(async (service, w) => {
      for (let i = w; i < inputs.length; i += 2) {
        const meta: TransferMeta = { id: 's', partitions: P, input: i, split: fx('slices'), splitArgs: [] };
        const result = await service.run({ key: `transfer-${i}`, name: ShuffleFunctions.transfer, args: [inputs[i], meta] });
        assert.ok(result.ok, JSON.stringify(result));
      }
    }),
  );
}

/** Each output of the shuffle, assembled by its owner, holds exactly its pieces of every input. */
async function assertOutputs(services: ShuffleService[], inputs: Uint8Array[], P: number): Promise<void> {
  const pieces = inputs.map((input) => slices(input, P));
  for (let j = 0; j < P; j++) {
    const meta: UnpackMeta = { id: 's', partitions: P, output: j, inputs: inputs.length, combine: fx('sha256', 'hash'), combineArgs: [] };
    const result = await services[j % 2].run({ key: `unpack-${j}`, name: ShuffleFunctions.unpack, args: [null, meta] });
    assert.ok(result.ok, JSON.stringify(result));
    assert.equal(result.value, sha256(pieces.map((p) => p[j])), `output ${j}`);
  }
}

test('splits reuse the frames of earlier splits, pushed to a peer or taken in locally, and every output is exact', async (t) => {
  const services = await twoWorkers(t);
  const P = 2;
  const inputs = Array.from({ length: 6 }, () => randomFillSync(new Uint8Array(4.25 * MiB)));
  await splitAll(services, inputs, P);
  // Each split fills 2 frames of at least half FRAME_BYTES (one 2 MiB piece per worker). The
  // second split of a worker reuses the frame pushed to the peer; the third, the frames the
  // receiver let go of too (the second piece of an output passes its chunk size: flushed).
  const frames = services.map((s) => ({ ...s.frames }));
  for (const [w, f] of frames.entries()) {
    assert.equal(f.reused + f.allocated, 6, `worker ${w}: 3 splits of 2 frames`);
    assert.ok(f.reused >= 3, `worker ${w} reused frames: ${JSON.stringify(f)}`);
  }
  // The copy of each input for its thread comes back: one allocated per split at once.
  for (const [w, service] of services.entries()) {
    const copies = service.inputCopies;
    assert.equal(copies.reused + copies.allocated, 3, `worker ${w}: 3 inputs copied`);
    assert.ok(copies.allocated <= 2 && copies.reused >= 1, `worker ${w} reused input copies: ${JSON.stringify(copies)}`);
  }
  for (const service of services) assert.ok(service.sharedFrameBytes > 0, 'the frames were laid out in shared memory');
  await assertOutputs(services, inputs, P);
  assert.equal(FRAME_BYTES, 4 * MiB, 'the sizes above assume 4 MiB frames');
});

test('splits of inputs under half a frame take no spare (which would count as room they have): the pool makes no shared memory', async (t) => {
  const services = await twoWorkers(t);
  const P = 2;
  // Each split lays out two frames of 0.75 MiB, which no spare would hold (under half a frame).
  const inputs = Array.from({ length: 6 }, () => randomFillSync(new Uint8Array(1.5 * MiB)));
  await splitAll(services, inputs, P);
  for (const [w, service] of services.entries()) {
    assert.equal(service.sharedFrameBytes, 0, `worker ${w} made no shared frame`);
    assert.deepEqual(service.frames, { reused: 0, allocated: 6 }, `worker ${w}: 3 splits of 2 frames of their own size`);
  }
  await assertOutputs(services, inputs, P);
  assert.equal(FRAME_BYTES, 4 * MiB, 'the sizes above assume 4 MiB frames');
});
