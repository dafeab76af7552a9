import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { binaryTag } from '../../src/codec/binary.js';
import { CodecError } from '../../src/index.js';
import { encodeToBuffer } from '../../src/transfer/index.js';

class MyBytes extends Uint8Array {}

/** Each kind with the tag the format gives it (0: not carried as a raw frame). */
const KINDS: ReadonlyArray<readonly [string, () => object, number]> = [
  ['Buffer', () => Buffer.alloc(8), 1],
  ['Uint8Array', () => new Uint8Array(8), 2],
  ['Uint8ClampedArray', () => new Uint8ClampedArray(8), 3],
  ['Int8Array', () => new Int8Array(8), 4],
  ['Uint16Array', () => new Uint16Array(8), 5],
  ['Int16Array', () => new Int16Array(8), 6],
  ['Uint32Array', () => new Uint32Array(8), 7],
  ['Int32Array', () => new Int32Array(8), 8],
  ['Float32Array', () => new Float32Array(8), 9],
  ['Float64Array', () => new Float64Array(8), 10],
  ['BigInt64Array', () => new BigInt64Array(8), 11],
  ['BigUint64Array', () => new BigUint64Array(8), 12],
  ['DataView', () => new DataView(new ArrayBuffer(8)), 13],
  ['ArrayBuffer', () => new ArrayBuffer(8), 14],
  ['SharedArrayBuffer', () => new SharedArrayBuffer(8), 15],
  ['a subclass of Uint8Array', () => new MyBytes(8), 0],
  ['a plain object', () => ({ a: 1 }), 0],
  ['an array', () => [1, 2], 0],
  // Impostors: a `constructor` of their own, or a view's prototype without a view.
  ['a plain object claiming to be a Buffer', () => ({ constructor: Buffer, data: 'kept' }), 0],
  ['a plain object claiming to be a Float64Array', () => ({ constructor: Float64Array }), 0],
  ['a plain object claiming to be a DataView', () => ({ constructor: DataView }), 0],
  ['a plain object claiming to be an ArrayBuffer', () => ({ constructor: ArrayBuffer }), 0],
  ['a plain object claiming to be a SharedArrayBuffer', () => ({ constructor: SharedArrayBuffer }), 0],
  ['an object made from Float64Array.prototype', () => Object.create(Float64Array.prototype) as object, 0],
];

describe('binaryTag', () => {
  it('gives every kind its stable tag, whatever kinds came just before (it remembers the last one)', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(KINDS.length - 1), { minLength: 1, maxLength: 40 }), (order) => {
        for (const k of order) {
          const [name, make, tag] = KINDS[k];
          assert.equal(binaryTag(make()), tag, name);
        }
      }),
    );
  });
});

describe('encode', () => {
  it('refuses an object that only claims to be a Buffer (its constructor is a function) instead of writing an empty Buffer', async () => {
    await assert.rejects(encodeToBuffer({ constructor: Buffer, data: 'kept' }), CodecError);
  });
});
