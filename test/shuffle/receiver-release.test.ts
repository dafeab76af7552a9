import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ShuffleReceiver } from '../../src/shuffle/receiver.js';
import { parseRecords } from '../../src/shuffle/records.js';
import { recordFrame as frame } from '../helpers/shuffle-records.js';
import { MiB, openStore } from '../helpers/store.js';

/** Every record of an output's chunks, checked byte for byte against what `frame` wrote. */
async function checkOutput(store: Awaited<ReturnType<typeof openStore>>['store'], keys: readonly string[], output: number, inputs: readonly number[], payloadBytes: number): Promise<void> {
  const seen: number[] = [];
  for (const key of keys) {
    const chunk = (await store.get(key)) as Uint8Array;
    for (const record of parseRecords(chunk)) {
      assert.equal(record.output, output);
      seen.push(record.input);
      for (let b = 0; b < payloadBytes; b++) assert.equal(record.payload[b], (record.input * 7 + output * 13 + b) & 0xff);
    }
  }
  assert.deepEqual(seen.sort(), [...inputs].sort());
}

test('a frame pushed with a release callback is released once its records are copied out, and the chunks keep exact bytes after the frame is reused', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 64 * MiB });
  const receiver = new ShuffleReceiver(store, { bufferBytes: 1 * MiB, chunkBytes: 1 * MiB });
  const released: number[] = [];
  const frames = [0, 1].map((input) => frame(input, [0, 1, 2], 1000));
  for (const [input, data] of frames.entries()) {
    await receiver.accept({ id: 's', run: 1, input, seq: 0, data: [data], released: () => released.push(input) });
  }
  assert.deepEqual(released, [], 'records still view the frames until their outputs are flushed');
  const zero = receiver.take('s', 0);
  const one = receiver.take('s', 1);
  assert.deepEqual(released, [], 'output 2 still views both frames');
  const two = receiver.take('s', 2);
  assert.deepEqual(released.sort(), [0, 1]);
  // The sender reuses its frames now: the chunks must not see it.
  for (const f of frames) f.fill(0xee);
  for (const [output, taken] of [zero, one, two].entries()) await checkOutput(store, taken?.keys ?? [], output, [0, 1], 1000);
});

test('a release callback is called exactly once for a retried frame, a frame of a stale run and a forgotten shuffle', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 64 * MiB });
  const receiver = new ShuffleReceiver(store, { bufferBytes: 1 * MiB, chunkBytes: 1 * MiB });
  const calls = new Map<string, number>();
  const count = (name: string) => () => calls.set(name, (calls.get(name) ?? 0) + 1);
  await receiver.accept({ id: 's', run: 2, input: 0, seq: 0, data: [frame(0, [0, 1], 64)], released: count('first') });
  await receiver.accept({ id: 's', run: 2, input: 0, seq: 0, data: [frame(0, [0, 1], 64)], released: count('retry') });
  assert.equal(calls.get('retry'), 1, 'a retried frame is not taken in: released at once');
  await assert.rejects(receiver.accept({ id: 's', run: 1, input: 1, seq: 0, data: [frame(1, [0], 64)], released: count('stale') }), { code: 'SPW_ERR_SHUFFLE_STALE_RUN' });
  assert.equal(calls.get('stale'), 1);
  // A frame that fills an output past chunkBytes is flushed while being taken in: released once, after.
  await receiver.accept({ id: 's', run: 2, input: 2, seq: 0, data: [frame(2, [3, 3, 3], 400_000)], released: count('big') });
  assert.equal(calls.get('big'), 1);
  assert.equal(calls.get('first'), undefined);
  receiver.forget('s', 2);
  assert.equal(calls.get('first'), 1, 'forgetting the shuffle drops the views');
  assert.deepEqual([...calls.values()], [1, 1, 1, 1]);
});
