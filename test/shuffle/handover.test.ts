/**
 * A retiring worker's handover of its shuffle chunks: spilled ones streamed from the tier in
 * frames along record boundaries (never read back into its memory), the heir's copy exact.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import fc from 'fast-check';
import type { Channel } from '../../src/control/channel.js';
import { ChecksumError } from '../../src/errors.js';
import { garbageCollector } from '../../src/runtime/garbage-collection.js';
import { chunkFrames, recordFrames } from '../../src/shuffle/chunk-frames.js';
import { type ShuffleHandedOverParams, ShuffleMethods } from '../../src/shuffle/protocol.js';
import { RECORD_HEADER_BYTES, parseRecords, recordLength, writeRecordHeader } from '../../src/shuffle/records.js';
import { ShuffleService } from '../../src/shuffle/worker-service.js';
import type { ByteRange } from '../../src/tiers/tier.js';
import { TierWrapper } from '../../src/tiers/wrappers.js';
import { DataServer } from '../../src/transfer/server.js';
import { MiB, openStore } from '../helpers/store.js';

/** Records of the given payload lengths for `output` (of `input`, else of inputs 0, 1...), concatenated as a chunk holds them. */
function recordsOf(output: number, lengths: readonly number[], seed = 0, input?: number): Uint8Array {
  const out = new Uint8Array(lengths.reduce((sum, n) => sum + recordLength(n), 0));
  let at = 0;
  lengths.forEach((length, i) => {
    writeRecordHeader(out, at, { output, input: input ?? i, part: 0, parts: 1, length });
    for (let b = 0; b < length; b++) out[at + RECORD_HEADER_BYTES + b] = (seed + i * 31 + b) & 0xff;
    at += recordLength(length);
  });
  return out;
}

/** Serves spilled bytes in reads of `readBytes` (headers and records split across reads), one byte flipped when `flip` is set. */
class ReadsOf extends TierWrapper {
  readBytes = 64 * 1024;
  flip: number | undefined;
  override createReadStream(id: number, range?: ByteRange): Readable {
    return Readable.from(this.#reads(this.inner.createReadStream(id, range)), { objectMode: true });
  }

  async *#reads(inner: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
    let at = 0;
    for await (const chunk of inner) {
      const copy = Uint8Array.from(chunk);
      if (this.flip !== undefined && this.flip >= at && this.flip < at + copy.byteLength) copy[this.flip - at] ^= 1;
      at += copy.byteLength;
      for (let i = 0; i < copy.byteLength; i += this.readBytes) yield copy.subarray(i, i + this.readBytes);
    }
  }
}

async function collect(frames: AsyncIterable<Uint8Array>): Promise<Uint8Array[]> {
  const out: Uint8Array[] = [];
  for await (const frame of frames) out.push(frame);
  return out;
}

test('a spilled chunk streamed from its tier gives the same frames as the chunk in memory, however the reads fall', async (t) => {
  let tier!: ReadsOf;
  const { store } = await openStore(t, { memoryLimit: 16 * MiB, wrap: (disk) => (tier = new ReadsOf(disk)) });
  let n = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(fc.nat({ max: 600 }), { minLength: 1, maxLength: 12 }), fc.integer({ min: 1, max: 2000 }), fc.integer({ min: 1, max: 700 }), async (lengths, frameBytes, readBytes) => {
      const chunk = recordsOf(n % 5, lengths, n);
      const key = `chunk-${n++}`;
      store.set(key, chunk);
      await store.evict();
      assert.notEqual(store.where(key), 'memory');
      tier.readBytes = readBytes;
      const before = store.stats().counters.unspilledBytes;
      const streamed = await collect(chunkFrames(store, key, frameBytes));
      assert.equal(store.stats().counters.unspilledBytes, before, 'nothing read back into memory');
      assert.notEqual(store.where(key), 'memory');
      const expected = [...recordFrames(chunk, frameBytes)];
      assert.deepEqual(streamed.map((f) => Buffer.from(f).toString('hex')), expected.map((f) => Buffer.from(f).toString('hex')));
      store.delete(key);
    }),
    { numRuns: 25, seed: 28 },
  );

  await t.test('a spilled chunk whose bytes fail their checksum is refused (the handover then fails and the run restarts)', async () => {
    const chunk = recordsOf(1, [100, 200, 300]);
    store.set('corrupt', chunk);
    await store.evict();
    tier.readBytes = 64;
    tier.flip = 200;
    await assert.rejects(collect(chunkFrames(store, 'corrupt', 1 << 20)), (err: unknown) => err instanceof ChecksumError);
    tier.flip = undefined;
  });
});

test('a retiring worker hands its slot over: spilled chunks streamed from disk (none read back into memory), chunks in memory as they are; the heir holds every record', async (t) => {
  // 16 MiB: chunks of 256 KiB (the receiver's sizes follow the memory limit).
  const { store: retiringStore } = await openStore(t, { memoryLimit: 16 * MiB });
  const { store: heirStore } = await openStore(t, { memoryLimit: 64 * MiB });
  // A handover runs nothing on the task threads.
  const executor = { run: () => assert.fail('no task runs in a handover') };
  const notified: { method: string; params: unknown }[] = [];
  const channel = { notify: (method: string, params: unknown) => notified.push({ method, params }) } as unknown as Channel;
  const heir = new ShuffleService({ store: heirStore, executor, channel: () => channel, token: undefined, self: { host: '127.0.0.1', port: 1 } });
  const server = await DataServer.listen(heirStore, { host: '127.0.0.1', onRequest: (body, payload) => heir.onRequest(body, payload) });
  const retiring = new ShuffleService({ store: retiringStore, executor, channel: () => channel, token: undefined, self: { host: '127.0.0.1', port: 2 } });
  t.after(async () => {
    retiring.close();
    heir.close();
    await server.close();
  });

  // 2 participants, 4 outputs: slot 0 owns outputs 0 and 2. Per input, a piece as large as a
  // chunk (stored at once, then spilled) and a small one (still buffered: flushed into memory by the handover).
  const slot = { id: 's', run: 5, slot: 0, participants: 2, partitions: 4 };
  const held = new Map<number, string[]>();
  for (let input = 0; input < 6; input++) {
    const parts: Uint8Array[] = [];
    for (let output = 0; output < 4; output++) {
      const piece = recordsOf(output, [300 * 1024 + input * 8, 40 + input], input * 4 + output, input);
      held.set(output, [...(held.get(output) ?? []), ...[...parseRecords(piece)].map((r) => Buffer.from(r.record).toString('hex'))]);
      parts.push(piece);
    }
    await retiring.receiver.accept({ id: 's', run: 5, input, seq: 0, data: [Buffer.concat(parts)] });
  }
  await retiringStore.evict();
  // The spilled chunks' memory is collected (the store would otherwise revive them from its weak
  // references), after a turn: a weak reference made in the current turn holds until it ends.
  await new Promise((resolve) => setImmediate(resolve));
  garbageCollector()?.();
  const spilled = retiringStore.stats().disk.count;
  assert.ok(spilled >= 24, `${spilled} chunks spilled`);
  const before = { ...retiringStore.stats().counters };

  heir.expect(slot);
  await retiring.handover({ ...slot, to: server.address });
  const reports = notified.filter((n) => n.method === ShuffleMethods.handedOver).map((n) => n.params as ShuffleHandedOverParams);
  assert.deepEqual(reports, [{ id: 's', run: 5, slot: 0, ok: true, error: undefined }]);
  const after = { ...retiringStore.stats().counters };
  assert.equal(after.unspilledBytes, before.unspilledBytes, 'no spilled chunk was read back into memory');
  assert.equal(after.weakHits, before.weakHits, 'nor revived from memory not yet collected');
  assert.ok(after.streamedFromTierBytes - before.streamedFromTierBytes >= 12 * 300 * 1024, 'the spilled chunks were streamed from disk');
  assert.equal(retiringStore.stats().disk.count, spilled / 2, "slot 0's chunks are gone from the retiring worker, slot 1's stay");

  for (const output of [0, 2]) {
    await heir.receiver.whenAdopted('s', output, 1000);
    const taken = heir.receiver.take('s', output);
    assert.equal(taken?.run, 5);
    const records: string[] = [];
    for (const key of taken?.keys ?? []) {
      for (const r of parseRecords((await heirStore.get(key)) as Uint8Array)) records.push(Buffer.from(r.record).toString('hex'));
    }
    assert.deepEqual(records.sort(), (held.get(output) ?? []).sort(), `output ${output}: every record, byte for byte`);
  }

  // The heir refuses slot 1 (it was told the run is over): the retiring worker says so, and keeps none of the chunks it handed out.
  heir.forget({ id: 's', run: 5 });
  await retiring.handover({ ...slot, slot: 1, to: server.address });
  const refused = notified.filter((n) => n.method === ShuffleMethods.handedOver).map((n) => n.params as ShuffleHandedOverParams)[1];
  assert.equal(refused.ok, false);
  assert.match(refused.error ?? '', /over here up to run 5/);
  assert.equal(retiringStore.stats().disk.count + retiringStore.stats().memory.count, 0, 'no chunk left on the retiring worker');
  assert.equal(retiring.receiver.runOf('s'), 5, 'its run stays until the scheduler ends it');
});
