/**
 * The receive side's buffers come back for reuse: a shuffle service on a small store takes
 * its pieces in (chunks written through from the pieces once the store is at its target),
 * and its unpacks take the chunks out into pooled buffers, lend them to a real executor
 * thread and get them back; later unpacks reuse them, and every output holds exactly its bytes.
 */
import assert from 'node:assert/strict';
import { randomFillSync } from 'node:crypto';
import { test } from 'node:test';
import { TAKE_CONCURRENCY } from '../../src/shuffle/chunk-loans.js';
import { ShuffleFunctions, type ShuffleRunInfo, type TransferMeta, type UnpackMeta } from '../../src/shuffle/protocol.js';
import { ShuffleService } from '../../src/shuffle/worker-service.js';
import { Executor } from '../../src/worker/executor.js';
import { onCleanup } from '../helpers/cleanup.js';
import { runInfoChannel } from '../helpers/shuffle-records.js';
import { MiB, openStore } from '../helpers/store.js';
import { sha256 } from './fixtures/hash.js';
import { slices } from './fixtures/split.js';
import { ext } from '../helpers/suite.js';

const fx = (name: string, file = 'split'): { module: string; name: string } => ({ module: new URL(`./fixtures/${file}${ext}`, import.meta.url).href, name });

test('chunks are laid out, read back and lent in reused buffers, and every output is exact', async (t) => {
  const executor = new Executor(1);
  onCleanup(t, () => executor.close());
  const P = 6;
  const inputs = Array.from({ length: 8 }, () => randomFillSync(new Uint8Array(1 * MiB)));
  // No pause level: the worker's room-making (RSS against it) would only spill and collect, this process being far past it.
  const { store } = await openStore(t, { memoryLimit: 6 * MiB, pause: false });
  const self = { host: '127.0.0.1', port: 1 };
  const info: ShuffleRunInfo = { run: 1, workers: [self], done: [] };
  const channel = runInfoChannel(info);
  // Pinned at the target: the store is under pressure, and chunks are written through.
  store.set('filler', new Uint8Array(store.targetBytes));
  const lease = await store.acquire(['filler']);
  t.after(() => lease.release());
  const service = new ShuffleService({ store, executor, channel: () => channel, token: undefined, self, retryMs: 5_000 });
  t.after(() => service.close());
  for (const [i, input] of inputs.entries()) {
    const meta: TransferMeta = { id: 's', partitions: P, input: i, split: fx('slices'), splitArgs: [] };
    const result = await service.run({ key: `transfer-${i}`, name: ShuffleFunctions.transfer, args: [input, meta] });
    assert.ok(result.ok, JSON.stringify(result));
  }
  const taken = service.chunkBuffers;
  assert.deepEqual(taken, { reused: 0, allocated: 0 }, 'chunks written through are written from the pieces, in no buffer of the pool');
  const pieces = inputs.map((input) => slices(input, P));
  for (let j = 0; j < P; j++) {
    const meta: UnpackMeta = { id: 's', partitions: P, output: j, inputs: inputs.length, combine: fx('sha256', 'hash'), combineArgs: [] };
    const result = await service.run({ key: `unpack-${j}`, name: ShuffleFunctions.unpack, args: [null, meta] });
    assert.ok(result.ok, JSON.stringify(result));
    assert.equal(result.value, sha256(pieces.map((p) => p[j])), `output ${j}`);
    assert.equal((result as { lent?: unknown }).lent, undefined, 'the lent buffers stay with the service');
  }
  const after = service.chunkBuffers;
  assert.ok(after.reused > taken.reused, `unpacks read chunks into buffers lent and handed back before: ${JSON.stringify(after)}`);
  // Every unpack's chunks read back through no more buffers than one unpack has reads in
  // flight: only buffers the threads handed back make that possible.
  assert.ok(after.allocated <= TAKE_CONCURRENCY, `the unpacks allocated a handful of buffers: ${JSON.stringify(after)}`);
  assert.deepEqual([...store.keys()], ['filler'], 'every chunk was taken out');
});
