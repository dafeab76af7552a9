import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeToBuffer } from '../../src/transfer/index.js';
import { DataClient } from '../../src/transfer/index.js';
import { serializeDataDone, serializeValue } from '../../src/transfer/serializer.js';
import { fakeServer, pattern, requestIdOf, watchIncoming, newStore } from './helpers.js';

describe('receiving to disk: the queue bound (diskQueueBytes)', () => {
  it('holds for the second of two values that cross it in one socket chunk: the first one draining does not lift its pause', async (t) => {
    const a = await encodeToBuffer(pattern(40 * 1024, 1));
    const b = await encodeToBuffer(pattern(8 * 1024 * 1024, 2));
    const address = await fakeServer(t, (socket, request) => {
      const id = requestIdOf(request);
      // One write: a, and the start of b, arrive in the same socket chunk.
      socket.write(Buffer.concat([serializeValue(id, 0, a.length), a, serializeValue(id, 1, b.length), b, serializeDataDone(id, 2)]));
    });
    const target = await newStore(t);
    let firstBatchOfB = -1;
    const store = watchIncoming(target, async (key, received) => {
      if (key !== 'b') return;
      // b's disk is slow: it starts reading 500 ms late, while a's is done at once.
      if (received === 0) await new Promise((r) => setTimeout(r, 500));
      else if (firstBatchOfB < 0) firstBatchOfB = received;
    });
    const diskQueueBytes = 16 * 1024;
    await new DataClient({ diskThresholdBytes: 0, diskQueueBytes }).fetch(address, ['a', 'b'], store);
    assert.deepEqual(await target.get('a'), pattern(40 * 1024, 1));
    assert.deepEqual(await target.get('b'), pattern(8 * 1024 * 1024, 2));
    // The limit plus the socket chunk that crossed it (64 KiB on loopback), not all of b.
    assert.ok(firstBatchOfB <= diskQueueBytes + 256 * 1024, `b queued ${firstBatchOfB} bytes while its disk was slow (limit ${diskQueueBytes})`);
  });
});
