/** ShuffleReceiver on its own: what `forget` drops, and what it refuses afterwards; which buffers its budget flushes. */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { ShuffleReceiver } from '../../src/shuffle/receiver.js';
import { RECORD_HEADER_BYTES, parseRecords, recordLength, writeRecordHeader } from '../../src/shuffle/records.js';
import { SpillStore } from '../../src/store/spill-store.js';

/** One record of `bytes` payload bytes for `output`. */
function record(output: number, input: number, bytes: number): Uint8Array {
  const out = new Uint8Array(recordLength(bytes));
  writeRecordHeader(out, 0, { output, input, part: 0, parts: 1, length: bytes });
  out.fill(input + 1, RECORD_HEADER_BYTES, RECORD_HEADER_BYTES + bytes);
  return out;
}

const chunkKeys = (store: SpillStore): string[] => [...store.keys()].filter((key) => key.startsWith('\u0000shuffle\u0000'));

test('ShuffleReceiver.forget drops a run, its chunks and its awaited adoptions, and refuses that run afterwards', async (t) => {
  const store = await SpillStore.open({ memoryLimit: '64 MiB', monitorIntervalMs: false });
  t.after(() => store.close());
  // Chunks of 64 bytes: every record goes to the store at once.
  const receiver = new ShuffleReceiver(store, { bufferBytes: 1 << 20, chunkBytes: 64 });

  await t.test('an adoption awaited for a shuffle this worker holds nothing else of is settled', async () => {
    receiver.expect('heir', 7, 1, [1, 3]);
    assert.equal(receiver.heldShuffles, 1);
    let settled = false;
    const waiting = receiver.whenAdopted('heir', 3, 60_000).then(() => (settled = true));
    receiver.forget('heir', 7);
    await Promise.race([waiting, sleep(2000)]);
    assert.equal(settled, true, 'the unpack waiting for the pieces goes on at once');
    assert.equal(receiver.heldShuffles, 0);
  });

  await t.test('the chunks of a run not taken are deleted from the store; a late push of that run is refused, a newer run taken', async () => {
    for (let input = 0; input < 3; input++) {
      await receiver.accept({ id: 's', run: 4, input, seq: 0, data: [record(0, input, 100), record(1, input, 100)] });
    }
    assert.equal(chunkKeys(store).length, 6);
    // Output 0 is assembled: its unpack deletes the chunks it took.
    const taken = receiver.take('s', 0)?.keys ?? [];
    assert.equal(taken.length, 3);
    for (const key of taken) store.delete(key);
    receiver.forget('s', 4);
    assert.deepEqual(chunkKeys(store), [], 'output 1 was never assembled: its chunks are gone');
    assert.equal(receiver.runOf('s'), undefined);
    assert.equal(receiver.heldShuffles, 0);
    await assert.rejects(receiver.accept({ id: 's', run: 4, input: 3, seq: 0, data: [record(1, 3, 8)] }), { code: 'SPW_ERR_SHUFFLE_STALE_RUN' });
    await assert.rejects(receiver.adopt('s', 4, 1, 0, [record(1, 3, 8)]), { code: 'SPW_ERR_SHUFFLE_STALE_RUN' });
    assert.equal(receiver.heldShuffles, 0, 'nothing of the forgotten run came back');
    await receiver.accept({ id: 's', run: 9, input: 0, seq: 0, data: [record(1, 0, 8)] });
    assert.equal(receiver.runOf('s'), 9);
  });

  await t.test('reset (the worker lost the scheduler, or closes) leaves nothing, and forgets which runs were over: a new scheduler numbers runs afresh', async () => {
    receiver.expect('other', 2, 0, [0]);
    await receiver.accept({ id: 'third', run: 5, input: 0, seq: 0, data: [record(0, 0, 100)] });
    assert.equal(receiver.heldShuffles, 3);
    receiver.reset();
    assert.equal(receiver.heldShuffles, 0);
    assert.equal(receiver.bufferedBytes, 0);
    assert.deepEqual(chunkKeys(store), []);
    await receiver.accept({ id: 's', run: 1, input: 0, seq: 0, data: [record(0, 0, 8)] });
    assert.equal(receiver.runOf('s'), 1);
    receiver.reset();
  });
});

/** One push frame: a record of `length` payload bytes for each [output, length], from `input`. */
function frame(input: number, records: readonly (readonly [number, number])[]): Uint8Array {
  return Buffer.concat(records.map(([output, length]) => record(output, input, length)));
}

/** The [output, payload length] of every record the chunks under `keys` hold. */
async function chunkRecords(receiver: ShuffleReceiver, store: SpillStore, keys: readonly string[]): Promise<[number, number][][]> {
  await receiver.written(keys);
  const lease = await store.acquire([...keys]);
  try {
    return keys.map((key) => [...parseRecords(lease.get(key) as Uint8Array)].map((r): [number, number] => [r.output, r.length]));
  } finally {
    lease.release();
  }
}

test('past its budget the receiver flushes the largest buffers, down to 3/4 of it, and keeps the smaller ones', async (t) => {
  const store = await SpillStore.open({ memoryLimit: '1 GiB', monitorIntervalMs: false });
  t.after(() => store.close());
  const receiver = new ShuffleReceiver(store, { bufferBytes: 16 * 1024, chunkBytes: 1 << 20 });
  // Output 0 holds 7 KiB, output 10 6 KiB, outputs 1-8 256 B each: under the budget.
  const small = Array.from({ length: 8 }, (_, j) => [j + 1, 256] as const);
  await receiver.accept({ id: 's', run: 1, input: 0, seq: 0, data: [frame(0, [[0, 7 * 1024], [10, 6 * 1024], ...small])] });
  const smallBytes = 8 * recordLength(256);
  assert.equal(receiver.bufferedBytes, recordLength(7 * 1024) + recordLength(6 * 1024) + smallBytes);
  // Output 9's 4 KiB pass the budget: outputs 0 and 10 go (the largest), which brings the
  // buffers under 3/4 of the budget; output 9 and the small ones stay.
  await receiver.accept({ id: 's', run: 1, input: 1, seq: 0, data: [frame(1, [[9, 4096]])] });
  assert.equal(receiver.bufferedBytes, smallBytes + recordLength(4096), 'only the smaller buffers are left');
  const zero = receiver.take('s', 0)?.keys ?? [];
  const ten = receiver.take('s', 10)?.keys ?? [];
  assert.deepEqual(await chunkRecords(receiver, store, [...zero, ...ten]), [[[0, 7 * 1024]], [[10, 6 * 1024]]]);
  // A buffer still held is flushed when its output is taken: one chunk, its one record.
  const nine = receiver.take('s', 9)?.keys ?? [];
  assert.deepEqual(await chunkRecords(receiver, store, nine), [[[9, 4096]]]);
  assert.equal(receiver.bufferedBytes, smallBytes);
});

test('many small pushes to many outputs leave each output with fewer chunks than flushing every buffer would', async (t) => {
  const store = await SpillStore.open({ memoryLimit: '1 GiB', monitorIntervalMs: false });
  t.after(() => store.close());
  const outputs = 64;
  const budget = 64 * 1024;
  const payload = 88;
  const receiver = new ShuffleReceiver(store, { bufferBytes: budget, chunkBytes: 1 << 20 });
  // Each push carries a record for a pseudo-random half of the outputs.
  let seed = 12345;
  let total = 0;
  for (let input = 0; input < 400; input++) {
    const records: [number, number][] = [];
    for (let j = 0; j < outputs; j++) {
      seed = (seed * 1103515245 + 12345) >>> 0;
      if (seed >>> 31 === 1) records.push([j, payload]);
    }
    total += records.length * recordLength(payload);
    await receiver.accept({ id: 's', run: 1, input, seq: 0, data: [frame(input, records)] });
    assert.ok(receiver.bufferedBytes <= budget, 'the buffers stay within their budget');
  }
  let chunks = 0;
  let pieces = 0;
  for (let j = 0; j < outputs; j++) {
    const keys = receiver.take('s', j)?.keys ?? [];
    chunks += keys.length;
    for (const held of await chunkRecords(receiver, store, keys)) {
      for (const [output] of held) assert.equal(output, j);
      pieces += held.length;
    }
  }
  assert.equal(pieces * recordLength(payload), total, 'every piece is held once');
  // Flushing every buffer at the budget makes chunks of budget / outputs bytes on average.
  const flushAll = total / (budget / outputs);
  assert.ok(chunks < 0.8 * flushAll, `${chunks} chunks, flushing every buffer makes ~${flushAll.toFixed(0)}`);
});
