import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DataClient, DataServer } from '../../src/transfer/index.js';
import { pattern, watchIncoming, newStore } from './helpers.js';
import { onCleanup } from '../helpers/cleanup.js';

const MiB = 1024 * 1024;

describe('key deleted on the server while its transfer runs', () => {
  for (const where of ['disk', 'memory'] as const) {
    it(`the transfer of a ${where} value completes with the exact bytes (the send pins it)`, async (t) => {
      const source = await newStore(t, { memoryLimit: '1 GiB' });
      const value = pattern(48 * MiB, 5);
      source.set('v', value);
      if (where === 'disk') await source.evict(Infinity);
      assert.equal(source.where('v'), where);
      const server = await DataServer.listen(source);
      onCleanup(t, () => server.close());
      const target = await newStore(t, { memoryLimit: '1 GiB' });
      let deleted = false;
      const watched = watchIncoming(target, (_key, received) => {
        if (!deleted && received > 4 * MiB) deleted = source.delete('v');
      });
      const result = await new DataClient({ diskThresholdBytes: 0, diskQueueBytes: MiB }).fetch(server.address, ['v'], watched);
      assert.ok(deleted, 'the key was deleted mid-transfer');
      assert.equal(source.has('v'), false);
      assert.deepEqual(result.fetched, ['v']);
      assert.deepEqual(await target.get('v'), value);
      const stats = server.stats();
      assert.equal(where === 'disk' ? stats.servedFromDiskBytes : stats.servedFromMemoryBytes, result.bytes);
    });
  }
});
