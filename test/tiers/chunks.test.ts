/** rechunk: a write source re-cut into chunks, views where a chunk lies inside one piece. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { TierLengthError } from '../../src/errors.js';
import { rechunk, type RawChunk } from '../../src/tiers/chunks.js';
import type { WriteSource } from '../../src/tiers/tier.js';

async function* batchesOf(pieces: Uint8Array[][]): WriteSource {
  for (const batch of pieces) yield batch;
}

async function chunksOf(pieces: Uint8Array[][], byteLength: number, chunkBytes: number): Promise<RawChunk[]> {
  const out: RawChunk[] = [];
  for await (const chunk of rechunk(batchesOf(pieces), byteLength, chunkBytes)) out.push({ bytes: Buffer.from(chunk.bytes), lent: chunk.lent });
  return out;
}

describe('rechunk', () => {
  it('lends views of a piece that holds whole chunks, and copies the chunks that straddle pieces', async () => {
    const a = Buffer.from(Array.from({ length: 25 }, (_, i) => i));
    const b = Buffer.from(Array.from({ length: 15 }, (_, i) => 100 + i));
    const views: Buffer[] = [];
    const lent: boolean[] = [];
    for await (const chunk of rechunk(batchesOf([[a], [b]]), 40, 10)) {
      views.push(chunk.bytes);
      lent.push(chunk.lent);
    }
    assert.deepEqual(lent, [true, true, false, true]);
    assert.equal(views[0].buffer, a.buffer, 'a view of the piece, not a copy');
    assert.deepEqual([...views[2]], [20, 21, 22, 23, 24, 100, 101, 102, 103, 104]);
    assert.deepEqual([...views[3]], [105, 106, 107, 108, 109, 110, 111, 112, 113, 114]);
  });

  it('rejects a source that yields more or fewer bytes than announced', async () => {
    await assert.rejects(chunksOf([[Buffer.alloc(5)]], 4, 2), TierLengthError);
    await assert.rejects(chunksOf([[Buffer.alloc(3)]], 4, 2), TierLengthError);
  });

  it('property: the chunks are the bytes, in order, cut at chunkBytes', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(fc.uint8Array({ maxLength: 40 }), { maxLength: 4 }), { maxLength: 6 }), fc.integer({ min: 1, max: 32 }), async (pieces, chunkBytes) => {
        const all = Buffer.concat(pieces.flat());
        const chunks = await chunksOf(pieces, all.byteLength, chunkBytes);
        assert.ok(Buffer.concat(chunks.map((c) => c.bytes)).equals(all));
        chunks.forEach((c, i) => assert.equal(c.bytes.byteLength, i < chunks.length - 1 ? chunkBytes : all.byteLength - chunkBytes * (chunks.length - 1)));
      }),
      { numRuns: 300 },
    );
  });
});
