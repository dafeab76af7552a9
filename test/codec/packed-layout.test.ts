import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { PackedLayout, SMALL_ENCODED_BYTES, copiedBytesOf, decodeVerified, encode, encodedBytesSync } from '../../src/codec/index.js';
import { binaryArb } from './arbitraries.js';

const valueArb = fc.oneof(
  binaryArb(),
  fc.string(),
  fc.array(fc.record({ n: fc.integer(), s: fc.string(), f: fc.double({ noNaN: true }) }), { maxLength: 20 }),
  fc.dictionary(fc.string(), binaryArb(), { maxKeys: 4 }),
  // A v8 value (-0, and one buffer twice) whose SharedArrayBuffer is a frame.
  fc.tuple(binaryArb(), binaryArb(['SharedArrayBuffer'])).map(([binary, shared]) => [-0, binary, shared, shared]),
);

/** Two pieces back to back in one buffer: a layout that gave both should have given one. */
function adjacent(a: Uint8Array, b: Uint8Array): boolean {
  return a.buffer === b.buffer && a.byteOffset + a.byteLength === b.byteOffset;
}

describe('PackedLayout: many small values back to back for one writev', () => {
  it('gives the values\' encoded bytes in order, shares large frames, and never leaves two side pieces that could be one', () => {
    fc.assert(
      fc.property(fc.array(valueArb, { minLength: 1, maxLength: 12 }), fc.constantFrom(0, 1, 16, 1024, SMALL_ENCODED_BYTES), (values, shareFrom) => {
        const encodings = values.map(encode);
        const layout = new PackedLayout(encodings.reduce((sum, e) => sum + copiedBytesOf(e, shareFrom), 0), shareFrom);
        for (const e of encodings) layout.add(e);
        const pieces = layout.pieces();
        assert.ok(Buffer.concat(pieces).equals(Buffer.concat(encodings.map(encodedBytesSync))));
        let shared = 0;
        for (const e of encodings) {
          for (const frame of e.frames) {
            if (frame.byteLength < shareFrom || frame.byteLength === 0) continue;
            shared++;
            assert.ok(pieces.includes(frame as Uint8Array), 'shared, not copied');
          }
        }
        // Copied bytes between two shared frames are one piece, across values too.
        assert.ok(pieces.length <= 2 * shared + 1, `${pieces.length} pieces for ${shared} shared frames`);
        for (let i = 1; i < pieces.length; i++) assert.ok(!adjacent(pieces[i - 1], pieces[i]), `pieces ${i - 1} and ${i} are one run`);
        assert.ok(pieces.every((p) => p.byteLength > 0), 'no empty piece');
      }),
    );
  });

  it('counts the copied bytes of every kind of value as its frames say (binary values keep their one frame)', () => {
    fc.assert(
      fc.property(valueArb, fc.constantFrom(0, 1, 16, 1024, SMALL_ENCODED_BYTES), (value, shareFrom) => {
        const e = encode(value);
        const shared = e.frames.reduce((sum, f) => sum + (f.byteLength >= shareFrom ? f.byteLength : 0), 0);
        assert.equal(copiedBytesOf(e, shareFrom), e.byteLength - shared);
        assert.equal(e.frames, e.frames, 'one frames array, made once');
      }),
    );
  });

  it('lays every binary kind at every length the way a single value is laid out', () => {
    const raw = Uint8Array.from({ length: 4099 }, (_, i) => i % 251);
    const values = [
      new Float64Array(512).fill(1.5),
      raw.subarray(0, 4096),
      raw.subarray(1, 4098),
      Buffer.from(raw.buffer, 3, 2048),
      new DataView(raw.buffer, 8, 1024),
      raw.buffer.slice(0, 1032),
      new Uint16Array(3),
      new Uint8Array(0),
    ];
    for (const shareFrom of [1, 1024, SMALL_ENCODED_BYTES]) {
      const encodings = values.map(encode);
      const layout = new PackedLayout(encodings.reduce((sum, e) => sum + copiedBytesOf(e, shareFrom), 0), shareFrom);
      for (const e of encodings) layout.add(e);
      assert.ok(Buffer.concat(layout.pieces()).equals(Buffer.concat(encodings.map(encodedBytesSync))), `shareFrom ${shareFrom}`);
    }
  });

  it('lays 1,000 arrays of 4 KiB as 2,001 pieces: each array itself, and the bytes around it (one piece between two)', async () => {
    const values = Array.from({ length: 1000 }, (_, i) => new Float64Array(512).fill(i));
    const encodings = values.map(encode);
    const layout = new PackedLayout(encodings.reduce((sum, e) => sum + copiedBytesOf(e, 1024), 0), 1024);
    for (const e of encodings) layout.add(e);
    const pieces = layout.pieces();
    assert.equal(pieces.length, 2001);
    values.forEach((v, i) => assert.equal(pieces[2 * i + 1].buffer, v.buffer, `value ${i} is its own memory`));
    // Each value, cut out of the whole by its length, decodes with its own checksum.
    const all = Buffer.concat(pieces);
    let at = 0;
    for (const [i, e] of encodings.entries()) {
      if (i % 97 === 0) assert.deepEqual(await decodeVerified(Buffer.from(all.subarray(at, at + e.byteLength))), values[i]);
      at += e.byteLength;
    }
    assert.equal(at, all.byteLength);
  });

  it('gives no pieces for no values, and the same pieces when asked twice', () => {
    const empty = new PackedLayout(0, 1024);
    assert.deepEqual(empty.pieces(), []);
    const layout = new PackedLayout(copiedBytesOf(encode('x'), 1024), 1024);
    layout.add(encode('x'));
    assert.equal(layout.pieces().length, 1);
    assert.equal(layout.pieces().length, 1);
  });

  it('refuses a value the side buffer has no room for, and a large value', () => {
    const small = encode({ a: 1 });
    const layout = new PackedLayout(copiedBytesOf(small, 1024) - 1, 1024);
    assert.throws(() => layout.add(small), RangeError);
    const large = encode(new Uint8Array(SMALL_ENCODED_BYTES));
    assert.throws(() => new PackedLayout(1 << 20, Infinity).add(large), RangeError);
  });
});
