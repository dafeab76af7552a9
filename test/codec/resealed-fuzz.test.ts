import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { FormatError } from '../../src/index.js';
import { decodeVerified, encodeToBuffer } from '../../src/transfer/index.js';
import { keyArb } from './arbitraries.js';
import { referenceChecksum } from './checksum-reference.js';

/**
 * A peer can compute a valid checksum over any bytes: decode must then stand on the layout
 * and decoder checks alone. Real values of every kind (msgpack with frame references, v8,
 * binary), bytes changed anywhere (frame table, header, frames, padding), trailer resealed:
 * a value or a FormatError, never another error. (errors.test.ts reseals random header
 * bytes of frameless values only.)
 */
function resealed(bytes: Uint8Array): Buffer {
  const out = Buffer.from(bytes);
  const trailer = out.byteLength - 8;
  out.writeBigUInt64LE(referenceChecksum(out.subarray(0, trailer)), trailer);
  return out;
}

const valueArb = fc.oneof(
  fc.anything({ key: keyArb, maxDepth: 3, maxKeys: 4, withBigInt: true, withDate: true, withMap: true, withSet: true, withTypedArray: true, stringUnit: 'binary' }),
  // Cycles take the v8 path.
  fc.dictionary(keyArb, fc.integer(), { maxKeys: 3 }).map((o) => {
    const v: Record<string, unknown> = { ...o };
    v.self = v;
    return v;
  }),
  fc.uint8Array({ maxLength: 64 }).map((a) => ({ bin: a, f: new Float64Array(a.length % 5) })),
);

describe('resealed corrupt values', () => {
  it('bytes changed anywhere, checksum made valid again: a value or FormatError', async () => {
    await fc.assert(
      fc.asyncProperty(valueArb, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 255 })), { minLength: 1, maxLength: 3 }), async (value, flips) => {
        const bytes = Buffer.from(await encodeToBuffer(value));
        for (const [at, x] of flips) bytes[at % (bytes.length - 8)] ^= x;
        try {
          await decodeVerified(resealed(bytes));
        } catch (err) {
          assert.ok(err instanceof FormatError && err.code === 'SPW_ERR_FORMAT', `not a FormatError: ${String(err)}`);
        }
      }),
      { numRuns: 600, seed: 1234 },
    );
  });
});
