import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { SMALL_ENCODED_BYTES, decodeVerified, encode, encodeToBuffer, encodedBytesSync, writeEncodedSync } from '../../src/codec/index.js';
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
