import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Crc32c, crc32c, crc32cChunked, crc32cPortable, nativeChecksum } from '../../src/codec/index.js';

test('CRC-32C check value: "123456789" is 0xE3069283', () => {
  const bytes = Buffer.from('123456789');
  assert.equal(crc32c(bytes), 0xe3069283);
  assert.equal(crc32cPortable(bytes), 0xe3069283);
});

test('the native CRC-32C is in use on this machine', () => {
  assert.equal(nativeChecksum, true);
});

test('native and portable agree, whole or in pieces, on any bytes', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 5000 }), fc.nat(5000), (bytes, cut) => {
      const at = Math.min(cut, bytes.length);
      const whole = crc32cPortable(bytes);
      assert.equal(crc32c(bytes), whole);
      const inc = new Crc32c().update(bytes.subarray(0, at)).update(bytes.subarray(at));
      assert.equal(inc.value, whole);
    }),
  );
});

test('chunked hashing of a large buffer equals one pass and yields to the loop', async () => {
  const bytes = new Uint8Array(9 * 1024 * 1024).map((_, i) => (i * 31) & 0xff);
  let ticks = 0;
  const timer = setInterval(() => ticks++, 0);
  const chunked = await crc32cChunked(bytes, 1024 * 1024);
  clearInterval(timer);
  assert.equal(chunked, crc32c(bytes));
  assert.ok(ticks >= 1, 'timers ran between slices');
});
