import assert from 'node:assert/strict';
import type { FileHandle } from 'node:fs/promises';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { TierShortWriteError } from '../../src/errors.js';
import { coalesce, writeFully } from '../../src/tiers/disk/file-io.js';

/** A FileHandle stand-in that records what lands where, writing at most `limit` bytes a call. */
function fakeHandle(limit: (call: number) => number) {
  const file = new Uint8Array(4096);
  let calls = 0;
  const land = (pieces: readonly Uint8Array[], position: number) => {
    let budget = limit(calls++);
    let written = 0;
    for (const piece of pieces) {
      const take = Math.min(budget, piece.byteLength);
      file.set(piece.subarray(0, take), position + written);
      written += take;
      budget -= take;
      if (take < piece.byteLength) break;
    }
    return { bytesWritten: written };
  };
  const handle = {
    write: async (buffer: Uint8Array, offset: number, length: number, position: number) => land([buffer.subarray(offset, offset + length)], position),
    writev: async (pieces: readonly Uint8Array[], position: number) => land(pieces, position),
  };
  return { handle: handle as unknown as FileHandle, file, calls: () => calls };
}

describe('coalesce: the pieces of one write', () => {
  it('returns the batch itself when nothing is empty or adjacent (a packed batch: no array made again)', () => {
    const side = new Uint8Array(64);
    const a = new Uint8Array(16);
    const b = new Uint8Array(16);
    const batch = [side.subarray(0, 8), a, side.subarray(8, 16), b, side.subarray(16, 24)];
    const { pieces, byteLength } = coalesce(batch);
    assert.equal(pieces, batch);
    assert.equal(byteLength, 56);
  });

  it('joins adjacent views of one buffer and drops empty pieces', () => {
    const buf = new Uint8Array(32);
    const other = new Uint8Array(4);
    const { pieces, byteLength } = coalesce([buf.subarray(0, 8), new Uint8Array(0), buf.subarray(8, 20), other, buf.subarray(20, 32)]);
    assert.equal(byteLength, 36);
    assert.equal(pieces.length, 3);
    assert.deepEqual(
      pieces.map((p) => [p.buffer === buf.buffer, p.byteOffset, p.byteLength]),
      [
        [true, 0, 20],
        [false, 0, 4],
        [true, 20, 12],
      ],
    );
  });

  it('keeps every byte in order, whatever the pieces (property)', () => {
    const buf = Uint8Array.from({ length: 256 }, (_, i) => i);
    const pieceArb = fc.oneof(
      fc.tuple(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 0, max: 16 })).map(([at, n]) => buf.subarray(at, Math.min(256, at + n))),
      fc.uint8Array({ maxLength: 8 }),
    );
    fc.assert(
      fc.property(fc.array(pieceArb, { maxLength: 20 }), (batch) => {
        const { pieces, byteLength } = coalesce(batch);
        assert.ok(Buffer.concat(pieces).equals(Buffer.concat(batch)));
        assert.equal(byteLength, Buffer.concat(batch).byteLength);
        assert.ok(pieces.every((p) => p.byteLength > 0));
      }),
    );
  });
});

describe('writeFully', () => {
  it('finishes a write the kernel took in several parts, whatever the parts', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.uint8Array({ minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 12 }), fc.integer({ min: 1, max: 50 }), async (batch, step) => {
        const all = Buffer.concat(batch);
        // Joined first, or as given with their total (a segment's flush of packed batches).
        for (const known of [undefined, all.byteLength]) {
          const { handle, file } = fakeHandle(() => step);
          await writeFully(handle, batch, 100, known);
          assert.ok(Buffer.from(file.subarray(100, 100 + all.byteLength)).equals(all), `total ${known}`);
        }
      }),
    );
  });

  it('fails with TierShortWriteError when the kernel writes nothing', async () => {
    const { handle, calls } = fakeHandle((call) => (call === 0 ? 3 : 0));
    await assert.rejects(writeFully(handle, [new Uint8Array(10), new Uint8Array(10)], 0), TierShortWriteError);
    assert.equal(calls(), 2);
  });
});
