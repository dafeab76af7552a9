import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DataClient, DataServer } from '../../src/transfer/index.js';
import { newStore } from './helpers.js';
import { onCleanup } from '../helpers/cleanup.js';

const GiB = 1024 * 1024 * 1024;

describe('a 1 GiB value', () => {
  // Receiving to disk is covered with smaller values elsewhere; here the receiver decodes into
  // memory, which checks one 1 GiB buffer end to end without a second 1 GiB disk write.
  it('moves spilled server store → client memory, streamed from the file, bit for bit', async (t) => {
    const source = await newStore(t, { memoryLimit: '2 GiB' });
    const value = Buffer.allocUnsafeSlow(GiB);
    // Distinct content per MiB so a misplaced chunk would change the crc.
    for (let i = 0; i < GiB; i += 1 << 20) value.fill(i >>> 20, i, i + (1 << 20));
    source.set('huge', value);
    await source.evict(Infinity);
    assert.equal(source.where('huge'), 'disk');
    const server = await DataServer.listen(source);
    onCleanup(t, () => server.close());
    const target = await newStore(t, { memoryLimit: '8 GiB', target: 0.9 });
    const client = new DataClient({ diskThresholdBytes: 2 * GiB, maxBytesInFlight: 2 * GiB, batchBytes: 2 * GiB });
    const result = await client.fetch(server.address, ['huge'], target);
    assert.equal(result.toMemory, 1);
    assert.ok(result.bytes > GiB);
    assert.equal(source.stats().counters.diskReads, 0, 'the server never loaded the value');
    assert.equal(server.stats().servedFromDiskBytes, result.bytes);
    const got = target.peek('huge');
    assert.ok(Buffer.isBuffer(got) && got.equals(value));
  });
});
