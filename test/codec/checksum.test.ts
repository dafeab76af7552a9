import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ValueHasher, checksumChunked, encodeToBuffer, nativeChecksum, xxh64 } from '../../src/codec/index.js';
import { Xxh64Portable, xxh64Portable } from '../../src/codec/xxh64.js';
import { referenceChecksum } from './checksum-reference.js';
import { BINARY_KINDS, binaryArb } from './arbitraries.js';

/** Binary values, plain values (no frames), and objects holding binary values (frames shared or copied). */
const valueArb = fc.oneof(
  binaryArb(BINARY_KINDS, 3000),
  fc.jsonValue(),
  fc.record({ name: fc.string(), data: binaryArb(BINARY_KINDS, 3000), more: fc.array(binaryArb(BINARY_KINDS, 100), { maxLength: 3 }) }),
);

test('XXH64 test vectors (xxHash sanity checks): portable and native', () => {
  const vectors: [string, bigint, bigint][] = [
    ['', 0n, 0xef46db3751d8e999n],
    ['a', 0n, 0xd24ec4f1a98c6e5bn],
    ['abc', 0n, 0x44bc2cf5ad770999n],
    ['Nobody inspects the spammish repetition', 0n, 0xfbcea83c8a378bf1n],
  ];
  for (const [text, seed, expected] of vectors) {
    const bytes = Buffer.from(text);
    assert.equal(xxh64Portable(bytes, seed), expected, JSON.stringify(text));
    assert.equal(xxh64(bytes, seed), expected, JSON.stringify(text));
  }
});

test('the native XXH64 is in use on this machine', () => {
  assert.equal(nativeChecksum(), true);
});

test('native and portable XXH64 agree, whole or streamed in any pieces, with any seed', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 3000 }), fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), fc.array(fc.nat(200), { maxLength: 12 }), (bytes, seed, cuts) => {
      const whole = xxh64Portable(bytes, seed);
      assert.equal(xxh64(bytes, seed), whole);
      const stream = new Xxh64Portable(seed);
      let at = 0;
      for (const cut of cuts) {
        stream.update(bytes.subarray(at, at + cut));
        at = Math.min(bytes.byteLength, at + cut);
      }
      stream.update(bytes.subarray(at));
      assert.equal(stream.digest(), whole);
    }),
  );
});

/** Feeds `bytes` to a ValueHasher in pieces cut at `cuts` (offsets, any order, any range). */
function hashInPieces(bytes: Uint8Array, hashedBytes: number, cuts: number[]): bigint {
  const hasher = new ValueHasher(hashedBytes);
  let at = 0;
  for (const cut of [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))].sort((a, b) => a - b)) {
    hasher.update(bytes.subarray(at, cut));
    at = cut;
  }
  hasher.update(bytes.subarray(at));
  return hasher.digest();
}

test('a value hashed in any pieces, trailer passed or not, matches its definition and its trailer', async () => {
  await fc.assert(
    fc.asyncProperty(valueArb, fc.array(fc.nat(), { maxLength: 10 }), async (value, cuts) => {
      const bytes = await encodeToBuffer(value);
      const hashed = bytes.byteLength - 8;
      const expected = bytes.readBigUInt64LE(hashed);
      assert.equal(referenceChecksum(bytes.subarray(0, hashed)), expected);
      // With the trailer (ignored past `hashedBytes`) and without it.
      assert.equal(hashInPieces(bytes, hashed, cuts), expected);
      assert.equal(hashInPieces(bytes.subarray(0, hashed), hashed, cuts), expected);
      assert.equal(await checksumChunked(bytes, hashed, 7), expected);
    }),
    { numRuns: 200 },
  );
});

test('prefix and body: the checksum is XXH64 of the body seeded with XXH64 of the prefix', async () => {
  const bytes = await encodeToBuffer(new Float64Array([1, 2, 3]));
  // One frame: 16 fixed + 8 for its length + a 1-byte header, padded to 32.
  assert.equal(bytes.readBigUInt64LE(bytes.byteLength - 8), xxh64(bytes.subarray(32, bytes.byteLength - 8), xxh64(bytes.subarray(0, 32), 0n)));
});

test('bytes that are not a value still get a digest, in any pieces, never an error', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 200 }), fc.nat(220), fc.array(fc.nat(), { maxLength: 6 }), (bytes, hashedBytes, cuts) => {
      const one = new ValueHasher(hashedBytes).update(bytes).digest();
      assert.equal(hashInPieces(bytes, hashedBytes, cuts), one);
    }),
  );
});

test('a value with no frames has an empty body', async () => {
  const bytes = await encodeToBuffer({ a: 1 });
  const hashed = bytes.byteLength - 8;
  assert.equal(bytes.readBigUInt64LE(hashed), xxh64(new Uint8Array(0), xxh64(bytes.subarray(0, hashed), 0n)));
});

test('chunked hashing of a large value equals one pass and yields to the loop', async () => {
  const frame = new Uint8Array(9 * 1024 * 1024).map((_, i) => (i * 31) & 0xff);
  const bytes = await encodeToBuffer(frame);
  const hashed = bytes.byteLength - 8;
  let ticks = 0;
  const timer = setInterval(() => ticks++, 0);
  const chunked = await checksumChunked(bytes, hashed, 1024 * 1024);
  clearInterval(timer);
  assert.equal(chunked, bytes.readBigUInt64LE(hashed));
  assert.equal(chunked, new ValueHasher(hashed).update(bytes).digest());
  assert.ok(ticks >= 1, 'timers ran between slices');
});
