/** ShuffleReceiver on its own: what `forget` drops, and what it refuses afterwards. */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { ShuffleReceiver } from '../../src/shuffle/receiver.js';
import { RECORD_HEADER_BYTES, recordLength, writeRecordHeader } from '../../src/shuffle/records.js';
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
