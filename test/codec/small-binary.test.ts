import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { SMALL_ENCODED_BYTES, binaryCopiedBytes, binaryFrameOf, binaryPiecesSync, copiedBytesOf, encode, encodedBytesSync, encodedPiecesSync } from '../../src/codec/index.js';
import { binaryArb } from './arbitraries.js';

describe('binaryPiecesSync: top-level binary values laid out without encode()', () => {
  it('gives the same bytes, pieces and side use as encode() + encodedPiecesSync, at any offset', () => {
    fc.assert(
      fc.property(fc.array(binaryArb(), { minLength: 1, maxLength: 8 }), fc.constantFrom(0, 1, 16, 1024, SMALL_ENCODED_BYTES), fc.nat(7), (values, shareFrom, lead) => {
        const frames = values.map((v) => binaryFrameOf(v));
        const encodings = values.map(encode);
        const side = new Uint8Array(lead + encodings.reduce((sum, e) => sum + copiedBytesOf(e, shareFrom), 0));
        const reference = new Uint8Array(side.byteLength);
        let offset = lead;
        frames.forEach((b, i) => {
          assert.ok(b !== undefined);
          const e = encodings[i];
          assert.equal(b.byteLength, e.byteLength);
          assert.equal(binaryCopiedBytes(b, shareFrom), copiedBytesOf(e, shareFrom));
          const pieces: Uint8Array[] = [];
          const expected: Uint8Array[] = [];
          const next = binaryPiecesSync(b, side, offset, shareFrom, pieces);
          assert.equal(encodedPiecesSync(e, reference, offset, shareFrom, expected), next);
          assert.ok(Buffer.concat(pieces).equals(encodedBytesSync(e)));
          assert.deepEqual(
            pieces.filter((p) => p.byteLength > 0).map((p) => [p.buffer === side.buffer, p.byteOffset, p.byteLength]),
            expected.filter((p) => p.byteLength > 0).map((p) => [p.buffer === reference.buffer, p.byteOffset, p.byteLength]),
          );
          offset = next;
        });
        assert.equal(offset, side.byteLength);
        assert.ok(Buffer.from(side).equals(Buffer.from(reference)));
      }),
    );
  });

  it('is undefined for what is not a binary payload', () => {
    for (const v of [null, undefined, 1, 'x', [1], { a: 1 }, new Map()]) assert.equal(binaryFrameOf(v), undefined);
  });

  it('refuses a side buffer without room', () => {
    const b = binaryFrameOf(new Float64Array(512));
    assert.ok(b !== undefined);
    const side = new Uint8Array(binaryCopiedBytes(b, 1024));
    assert.throws(() => binaryPiecesSync(b, side, 1, 1024, []), RangeError);
    assert.throws(() => binaryPiecesSync(b, side, -1, 1024, []), RangeError);
  });
});
