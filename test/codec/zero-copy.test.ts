import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  TRAILER_BYTES,
  decodeVerified,
  encode,
  encodeToBuffer,
  encodedBatches,
  gatheredBatches,
  layoutOfBytes,
} from '../../src/codec/index.js';
import { MAX_ENCODED_BYTES } from '../../src/codec/encode.js';
import { TYPED_ARRAY_CONSTRUCTORS, binaryArb, fill } from './arbitraries.js';
import { referenceChecksum } from './checksum-reference.js';

type View = ArrayBufferView;

async function collect(batches: AsyncIterable<Uint8Array[]>): Promise<Uint8Array[][]> {
  const out: Uint8Array[][] = [];
  for await (const batch of batches) out.push(batch);
  return out;
}

const lengthOf = (batch: readonly Uint8Array[]): number => batch.reduce((n, piece) => n + piece.byteLength, 0);

describe('decoded binary values are views over the input, not copies', () => {
  for (const ctor of [...TYPED_ARRAY_CONSTRUCTORS, Buffer, DataView]) {
    it(`${ctor.name}`, async () => {
      const backing = new ArrayBuffer(8 * 33);
      fill(new Uint8Array(backing), 7);
      const value: View = ctor === Buffer ? Buffer.from(backing, 8, 8 * 31) : new (ctor as Float64ArrayConstructor)(backing, 8, 31);
      const bytes = await encodeToBuffer(value);
      const layout = layoutOfBytes(bytes);
      const decoded = (await decodeVerified(bytes)) as View;
      assert.equal(decoded.constructor, value.constructor);
      assert.equal(decoded.buffer, bytes.buffer, 'same memory as the input');
      assert.equal(decoded.byteOffset, bytes.byteOffset + layout.frameOffsets[0]);
      assert.equal(decoded.byteOffset % 8, 0, '8-byte aligned');
      assert.equal(decoded.byteLength, value.byteLength);
      // A write through the input shows in the decoded value: it is a view.
      const first = new Uint8Array(decoded.buffer, decoded.byteOffset, 1);
      bytes[layout.frameOffsets[0]] ^= 0xff;
      assert.equal(first[0], new Uint8Array(value.buffer, value.byteOffset, 1)[0] ^ 0xff);
    });
  }

  it('nested in an object: every frame is a view at its layout offset', async () => {
    const value = {
      a: new Float64Array([1.5, 2.5, 3.5]),
      list: [Buffer.from('odd length!'), { deep: new Int16Array([1, 2, 3]) }],
      m: new Map([['u', new BigInt64Array([-1n, 5n])]]),
    };
    const bytes = await encodeToBuffer(value);
    const layout = layoutOfBytes(bytes);
    assert.equal(layout.frameOffsets.length, 4);
    const d = (await decodeVerified(bytes)) as typeof value;
    assert.deepStrictEqual(d, value);
    const views: View[] = [d.a, d.list[0] as Buffer, (d.list[1] as { deep: Int16Array }).deep, d.m.get('u') as BigInt64Array];
    const offsets = views.map((v) => {
      assert.equal(v.buffer, bytes.buffer);
      assert.equal(v.byteOffset % 8, 0);
      return v.byteOffset - bytes.byteOffset;
    });
    assert.deepEqual(offsets.sort((x, y) => x - y), [...layout.frameOffsets].sort((x, y) => x - y));
  });

  it('input inside a bigger buffer at an 8-aligned offset: views at that offset + the frame offset', async () => {
    const encoded = await encodeToBuffer(new Float64Array([1, 2, 3]));
    const container = new ArrayBuffer(encoded.byteLength + 64);
    const input = new Uint8Array(container, 24, encoded.byteLength);
    input.set(encoded);
    const decoded = (await decodeVerified(input)) as Float64Array;
    assert.equal(decoded.buffer, container);
    assert.equal(decoded.byteOffset, 24 + layoutOfBytes(input).frameOffsets[0]);
    assert.deepEqual([...decoded], [1, 2, 3]);
  });

  it('a misaligned input still decodes correctly (one copy where a view is impossible)', async () => {
    await fc.assert(
      fc.asyncProperty(binaryArb(), fc.integer({ min: 1, max: 7 }), async (value, shift) => {
        const encoded = await encodeToBuffer({ v: value });
        const container = new ArrayBuffer(encoded.byteLength + 8);
        const input = new Uint8Array(container, shift, encoded.byteLength);
        input.set(encoded);
        assert.deepStrictEqual(await decodeVerified(input), { v: value });
      }),
      { numRuns: 150 },
    );
  });
});

describe('encode(): frames are views over the value\'s own memory', () => {
  it('a top-level typed array', () => {
    const backing = new ArrayBuffer(1024);
    const value = new Float32Array(backing, 16, 100);
    const encoded = encode(value);
    assert.equal(encoded.frames.length, 1);
    const [frame] = encoded.frames;
    assert.equal(frame.buffer, backing);
    assert.equal(frame.byteOffset, 16);
    assert.equal(frame.byteLength, 400);
    value[0] = 42; // later writes are visible: nothing was copied
    assert.equal(new Float32Array(frame.buffer, frame.byteOffset, 1)[0], 42);
  });

  it('values nested in an object, ArrayBuffers and SharedArrayBuffers too', () => {
    const buf = Buffer.from('pooled'); // a slice of Node's pool: byteOffset usually > 0
    const ab = new ArrayBuffer(10);
    const sab = new SharedArrayBuffer(12);
    const dv = new DataView(new ArrayBuffer(32), 3, 9);
    const value = { x: [buf, { ab }], sab, dv };
    const encoded = encode(value);
    const sources: [ArrayBufferLike, number, number][] = [
      [buf.buffer, buf.byteOffset, buf.byteLength],
      [ab, 0, 10],
      [sab, 0, 12],
      [dv.buffer, 3, 9],
    ];
    assert.equal(encoded.frames.length, sources.length);
    for (const [buffer, byteOffset, byteLength] of sources) {
      const frame = encoded.frames.find((f) => f.buffer === buffer);
      assert.ok(frame !== undefined, 'a frame over the value\'s memory');
      assert.equal(frame.byteOffset, byteOffset);
      assert.equal(frame.byteLength, byteLength);
    }
    assert.equal(encoded.byteLength, encoded.layout.totalLength);
    assert.equal(encoded.prefix.byteLength, encoded.layout.frameOffsets[0]);
  });

  it('a plain value has no frames and its prefix runs up to the trailer', () => {
    const encoded = encode({ a: [1, 'two'] });
    assert.equal(encoded.frames.length, 0);
    assert.equal(encoded.prefix.byteLength, encoded.layout.trailerOffset);
  });
});

describe('encodedBatches', () => {
  it('batches of at most the requested size; concatenation equals encodeToBuffer; checksum trailer', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(binaryArb(undefined, 300), fc.record({ a: binaryArb(), b: binaryArb(), s: fc.string() })),
        fc.integer({ min: 1, max: 200 }),
        async (value, batchBytes) => {
          const encoded = encode(value);
          const batches = await collect(encodedBatches(encoded, batchBytes));
          const lengths = batches.map(lengthOf);
          assert.ok(batches.length > 0);
          for (const [i, length] of lengths.entries()) {
            assert.ok(length >= 1 && length <= batchBytes, `batch ${i}: ${length} > ${batchBytes}`);
            // Only the last batch may be short.
            if (i < lengths.length - 1) assert.equal(length, batchBytes);
          }
          for (const batch of batches) for (const piece of batch) assert.ok(piece.byteLength > 0, 'no empty pieces');
          const joined = Buffer.concat(batches.flat());
          assert.ok(joined.equals(await encodeToBuffer(value)));
          assert.equal(joined.byteLength, encoded.byteLength);
          const trailerOffset = joined.byteLength - TRAILER_BYTES;
          assert.equal(joined.readBigUInt64LE(trailerOffset), referenceChecksum(joined.subarray(0, trailerOffset)));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('the default batch size gives one batch for a small value', async () => {
    const batches = await collect(encodedBatches(encode({ a: 1 })));
    assert.equal(batches.length, 1);
  });

  it('a large frame is cut into slices that are views over the value (no copies)', async () => {
    const value = new Float64Array(40_000); // 320 000 bytes
    const batches = await collect(encodedBatches(encode(value), 64 * 1024));
    assert.ok(batches.length >= 5);
    const framePieces = batches.flat().filter((piece) => piece.buffer === value.buffer);
    assert.equal(framePieces.reduce((n, p) => n + p.byteLength, 0), value.byteLength);
  });

  it('rejects a batch size that is not a positive integer', async () => {
    for (const bad of [0, -1, 1.5, NaN]) {
      await assert.rejects(collect(encodedBatches(encode(1), bad)), RangeError, String(bad));
    }
  });
});

describe('gatheredBatches', () => {
  it('writes pieces laid end to end exactly as encodedBatches writes their concatenation', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 12 }), fc.integer({ min: 1, max: 200 }), async (pieces, batchBytes) => {
        const whole = new Uint8Array(Buffer.concat(pieces));
        const gathered = await collect(gatheredBatches(pieces, batchBytes));
        const expected = await collect(encodedBatches(encode(whole), batchBytes));
        assert.deepEqual(gathered.map(lengthOf), expected.map(lengthOf));
        for (const batch of gathered) for (const piece of batch) assert.ok(piece.byteLength > 0, 'no empty pieces');
        const joined = Buffer.concat(gathered.flat());
        assert.ok(joined.equals(Buffer.concat(expected.flat())));
        const decoded = (await decodeVerified(joined)) as Uint8Array;
        assert.equal(decoded.constructor, Uint8Array);
        assert.deepEqual(decoded, whole);
      }),
      { numRuns: 300 },
    );
  });

  it('writes the pieces from where they are, not copies of them', async () => {
    const pieces = [new Uint8Array(100_000).fill(1), new Uint8Array(3).fill(2), new Uint8Array(250_000).fill(3)];
    const batches = await collect(gatheredBatches(pieces, 64 * 1024));
    for (const piece of pieces) {
      const written = batches.flat().filter((p) => p.buffer === piece.buffer);
      assert.equal(written.reduce((n, p) => n + p.byteLength, 0), piece.byteLength);
    }
  });

  it('refuses pieces longer together than one value may be, before anything is written', async () => {
    const piece = new Uint8Array(new ArrayBuffer(0), 0, 0);
    const many = new Array<Uint8Array>(1).fill(piece);
    Object.defineProperty(many[0], 'byteLength', { value: MAX_ENCODED_BYTES });
    // The first batch asked for is refused: none was yielded.
    await assert.rejects(gatheredBatches(many).next(), { code: 'SPW_ERR_CODEC' });
  });
});
