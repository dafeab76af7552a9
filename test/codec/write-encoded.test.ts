import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  SMALL_ENCODED_BYTES,
  copiedBytesOf,
  decodeVerified,
  encode,
  encodeToBuffer,
  encodedBytesSync,
  encodedPiecesSync,
  writeEncodedSync,
} from '../../src/codec/index.js';
import { FIXED_PREFIX_BYTES, FORMAT_VERSION, HeaderKind, MAGIC, layoutOf, writePrefix } from '../../src/codec/format.js';
import { binaryArb } from './arbitraries.js';

const valueArb = fc.oneof(
  binaryArb(),
  fc.string(),
  fc.array(fc.record({ n: fc.integer(), s: fc.string(), f: fc.double({ noNaN: true }) }), { maxLength: 20 }),
  fc.dictionary(fc.string(), binaryArb(), { maxKeys: 4 }),
);

describe('writeEncodedSync: small values laid out back to back in one buffer', () => {
  it('writes exactly the bytes encodedBytesSync gives, at any offset, and nothing outside them', () => {
    fc.assert(
      fc.property(fc.array(valueArb, { minLength: 1, maxLength: 8 }), fc.nat(7), (values, lead) => {
        const encodings = values.map(encode);
        const total = encodings.reduce((sum, e) => sum + e.byteLength, lead);
        const out = Buffer.alloc(total + 5, 0xab);
        let at = lead;
        for (const e of encodings) at += writeEncodedSync(e, out, at);
        assert.equal(at, total);
        assert.ok(out.subarray(0, lead).every((b) => b === 0xab), 'bytes before are untouched');
        assert.ok(out.subarray(total).every((b) => b === 0xab), 'bytes after are untouched');
        at = lead;
        for (const e of encodings) {
          assert.ok(out.subarray(at, at + e.byteLength).equals(encodedBytesSync(e)));
          at += e.byteLength;
        }
      }),
    );
  });

  it('gives values that decode (checksum included) from their place in the shared buffer', async () => {
    const values = [Float64Array.from({ length: 512 }, (_, i) => i / 7), 'text', { a: [1, 2, 3], b: Buffer.from('xyz') }];
    const encodings = values.map(encode);
    const out = Buffer.allocUnsafeSlow(encodings.reduce((sum, e) => sum + e.byteLength, 0));
    let at = 0;
    for (const [i, e] of encodings.entries()) {
      const length = writeEncodedSync(e, out, at);
      assert.ok(out.subarray(at, at + length).equals(await encodeToBuffer(values[i])));
      assert.deepEqual(await decodeVerified(Buffer.from(out.subarray(at, at + length))), values[i]);
      at += length;
    }
  });

  it('refuses large values and buffers without room', () => {
    const small = encode('x');
    assert.throws(() => writeEncodedSync(small, Buffer.alloc(small.byteLength - 1), 0), RangeError);
    assert.throws(() => writeEncodedSync(small, Buffer.alloc(small.byteLength), 1), RangeError);
    assert.throws(() => writeEncodedSync(small, Buffer.alloc(small.byteLength), -1), RangeError);
    const large = encode(new Uint8Array(SMALL_ENCODED_BYTES));
    assert.throws(() => writeEncodedSync(large, Buffer.alloc(large.byteLength), 0), RangeError);
  });
});

describe('encodedPiecesSync: small values for a writev, large frames not copied', () => {
  it('gives pieces that join to the encoded bytes; frames from shareFrom up are the value\'s own memory', () => {
    fc.assert(
      fc.property(fc.array(valueArb, { minLength: 1, maxLength: 8 }), fc.constantFrom(0, 1, 16, 1024, SMALL_ENCODED_BYTES), (values, shareFrom) => {
        const encodings = values.map(encode);
        const side = new Uint8Array(encodings.reduce((sum, e) => sum + copiedBytesOf(e, shareFrom), 0));
        let offset = 0;
        for (const e of encodings) {
          const pieces: Uint8Array[] = [];
          const next = encodedPiecesSync(e, side, offset, shareFrom, pieces);
          assert.equal(next - offset, copiedBytesOf(e, shareFrom), 'side bytes used');
          offset = next;
          assert.ok(Buffer.concat(pieces).equals(encodedBytesSync(e)));
          for (const frame of e.frames) {
            if (frame.byteLength >= shareFrom && frame.byteLength > 0) assert.ok(pieces.includes(frame as Uint8Array), 'shared, not copied');
          }
        }
        assert.equal(offset, side.byteLength);
      }),
    );
  });

  it('binary values alternating between types and lengths keep their own prefix and checksum', async () => {
    // Their prefix is laid out once per layout and header and reused: switching between
    // layouts, and another kind of value in between, must never carry one value's over.
    const values: unknown[] = [
      Float64Array.from({ length: 512 }, (_, i) => i),
      Float64Array.from({ length: 512 }, (_, i) => -i),
      Uint8Array.from({ length: 4096 }, (_, i) => i % 251),
      { not: 'binary', n: 1 },
      Float64Array.from({ length: 256 }, (_, i) => i / 3),
      Float64Array.from({ length: 512 }, (_, i) => i * 7),
      new BigInt64Array(300).fill(5n),
    ];
    const encodings = values.map(encode);
    const side = new Uint8Array(encodings.reduce((sum, e) => sum + copiedBytesOf(e, 1024), 0));
    let offset = 0;
    for (const [k, e] of encodings.entries()) {
      const pieces: Uint8Array[] = [];
      offset = encodedPiecesSync(e, side, offset, 1024, pieces);
      assert.ok(Buffer.concat(pieces).equals(encodedBytesSync(e)), `value ${k}`);
      // decodeVerified checks the trailer's checksum against the bytes.
      assert.deepEqual(await decodeVerified(Buffer.concat(pieces)), values[k]);
    }
    assert.equal(offset, side.byteLength);
  });

  it('writes a 4 KiB array without copying it: one side piece before, the array, one after', () => {
    const value = Float64Array.from({ length: 512 }, (_, i) => i);
    const e = encode(value);
    const side = new Uint8Array(copiedBytesOf(e, 1024) + 3);
    const pieces: Uint8Array[] = [];
    assert.equal(encodedPiecesSync(e, side, 3, 1024, pieces), side.byteLength);
    assert.equal(pieces.length, 3);
    assert.equal(pieces[1].buffer, value.buffer);
    assert.throws(() => encodedPiecesSync(e, side, 4, 1024, []), RangeError);
  });
});

describe('writePrefix', () => {
  it('writes frame lengths as u64 LE, beyond 32 bits too', () => {
    const lengths = [0, 1, 0xffff_ffff, 0x1_0000_0000, 5 * 2 ** 40 + 3, Number.MAX_SAFE_INTEGER];
    const layout = layoutOf(HeaderKind.Msgpack, 12, lengths);
    const header = Buffer.alloc(12, 0xab);
    // At an offset, into a buffer of junk: every byte of the prefix is written, padding too.
    const at = 3;
    const out = Buffer.alloc(at + layout.frameOffsets[0] + 5, 0xee);
    assert.equal(writePrefix(out, at, layout, header), layout.frameOffsets[0]);
    const prefix = out.subarray(at);
    assert.equal(prefix.readUInt32LE(0), MAGIC);
    assert.equal(prefix[4], FORMAT_VERSION);
    assert.equal(prefix[5], HeaderKind.Msgpack);
    lengths.forEach((n, i) => assert.equal(prefix.readBigUInt64LE(FIXED_PREFIX_BYTES + 8 * i), BigInt(n)));
    assert.equal(prefix.readUInt32LE(8), 12);
    assert.equal(prefix.readUInt32LE(12), lengths.length);
    assert.deepEqual(prefix.subarray(layout.headerOffset, layout.headerOffset + 12), header);
    assert.ok(prefix.subarray(layout.headerOffset + 12, layout.frameOffsets[0]).every((b) => b === 0), 'header padding is zeros');
    assert.equal(out[0], 0xee, 'nothing written before the offset');
    assert.equal(out[at + layout.frameOffsets[0]], 0xee, 'nothing written after the prefix');
  });
});
