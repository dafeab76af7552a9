import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import v8 from 'node:v8';
import { FORMAT_VERSION, encodeToBuffer, parseLayout, type Layout } from '../../src/codec/index.js';
import { referenceChecksum, trailerBytes } from './checksum-reference.js';

/**
 * Byte-level tests in the style of pg-protocol's: the expected bytes are written out by
 * hand from the format description (src/codec/format.ts), so a change to the layout
 * fails here even if encoder and decoder change together.
 */

const u32 = (n: number): number[] => [n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, (n >>> 24) & 0xff];
const u64 = (n: number): number[] => [...u32(n), 0, 0, 0, 0];
const zeros = (n: number): number[] => new Array<number>(n).fill(0);
const MAGIC = [0x53, 0x50, 0x57, 0x59]; // 'SPWY'

/** Appends the trailer: the checksum of all before it (from its definition, with the portable XXH64), u64 LE. */
function sealed(body: number[]): Buffer {
  assert.equal(body.length % 8, 0, 'the trailer starts 8-byte aligned');
  const bytes = Buffer.from(body);
  return Buffer.concat([bytes, trailerBytes(referenceChecksum(bytes))]);
}

function assertBytes(actual: Buffer, expected: Buffer): void {
  // Hex dumps make a mismatch readable.
  assert.equal(actual.toString('hex'), expected.toString('hex'));
}

describe('encoded bytes, built by hand', () => {
  it('magic "SPWY" and version 2', async () => {
    const bytes = await encodeToBuffer(null);
    assert.equal(bytes.toString('latin1', 0, 4), 'SPWY');
    assert.equal(bytes[4], 2);
    assert.equal(FORMAT_VERSION, 2);
  });

  it('a small Float64Array: kind 0, one-byte tag header, one 16-byte frame', async () => {
    const value = new Float64Array([1.5, -2]);
    const expected = sealed([
      ...MAGIC, /* version */ 2, /* kind binary */ 0, /* reserved */ 0, 0,
      ...u32(1), // header length: the tag
      ...u32(1), // one frame
      ...u64(16), // frame 0: 16 bytes
      /* header at 24: tag 10 = Float64Array */ 10, ...zeros(7), // padded to 32
      ...Buffer.from(value.buffer), // frame at 32, 16 bytes, already a multiple of 8
    ]);
    assert.equal(expected.byteLength, 56);
    assertBytes(await encodeToBuffer(value), expected);
  });

  it('a 5-byte Buffer: tag 1, frame padded with 3 zero bytes', async () => {
    const expected = sealed([
      ...MAGIC, 2, 0, 0, 0,
      ...u32(1),
      ...u32(1),
      ...u64(5),
      /* tag Buffer */ 1, ...zeros(7),
      ...Buffer.from('hello'), 0, 0, 0,
    ]);
    assert.equal(expected.byteLength, 48);
    assertBytes(await encodeToBuffer(Buffer.from('hello')), expected);
  });

  it('an empty Uint8Array: a 0-length frame takes no bytes', async () => {
    const expected = sealed([...MAGIC, 2, 0, 0, 0, ...u32(1), ...u32(1), ...u64(0), /* tag Uint8Array */ 2, ...zeros(7)]);
    assertBytes(await encodeToBuffer(new Uint8Array(0)), expected);
  });

  it('{a: 1}: kind 1, a msgpackr record header, no frames', async () => {
    // msgpackr record: fixext1 'r' 0x40 defines record 0x40 with keys ['a'], then its values.
    const header = [0xd4, 0x72, 0x40, 0x91, 0xa1, 0x61, 0x01];
    const expected = sealed([
      ...MAGIC, 2, /* kind msgpack */ 1, 0, 0,
      ...u32(header.length),
      ...u32(0), // no frames, no frame table
      ...header, 0, // header at 16, padded to 24
    ]);
    assert.equal(expected.byteLength, 32);
    assertBytes(await encodeToBuffer({ a: 1 }), expected);
  });

  it('{a: Float64Array}: the array becomes frame 0, referenced from the header', async () => {
    // Frame reference: msgpackr extension 0x53 carrying [frame index 0, tag 10].
    const header = [0xd4, 0x72, 0x40, 0x91, 0xa1, 0x61, 0xd4, 0x53, 0x00, 0x92, 0x00, 0x0a];
    const expected = sealed([
      ...MAGIC, 2, 1, 0, 0,
      ...u32(header.length),
      ...u32(1),
      ...u64(8),
      ...header, ...zeros(4), // header at 24, 12 bytes, padded to 40
      ...Buffer.from(new Float64Array([1]).buffer), // frame at 40
    ]);
    assertBytes(await encodeToBuffer({ a: new Float64Array([1]) }), expected);
  });

  it('[-0]: kind 2, the v8 serializer\'s bytes as the header', async () => {
    const header = [...v8.serialize([-0])];
    const padded = Math.ceil((16 + header.length) / 8) * 8 - 16;
    const expected = sealed([...MAGIC, 2, /* kind v8 */ 2, 0, 0, ...u32(header.length), ...u32(0), ...header, ...zeros(padded - header.length)]);
    assertBytes(await encodeToBuffer([-0]), expected);
  });

  it('[-0, sab, sab]: kind 2, the SharedArrayBuffer as frame 0, named in the header as transferred buffer 0', async () => {
    const sab = new SharedArrayBuffer(5);
    new Uint8Array(sab).set([1, 2, 3, 4, 5]);
    // What Node's v8 serializer writes with an ArrayBuffer transferred out of band as id 0
    // in the SharedArrayBuffer's place: tag 't' and the id, then a back-reference.
    const stand = new ArrayBuffer(5);
    const serializer = new v8.DefaultSerializer();
    serializer.transferArrayBuffer(0, stand);
    serializer.writeHeader();
    serializer.writeValue([-0, stand, stand]);
    const header = [...serializer.releaseBuffer()];
    assert.ok(Buffer.from(header).includes(Buffer.from([0x74, 0x00])));
    const padded = Math.ceil((24 + header.length) / 8) * 8 - 24;
    const expected = sealed([
      ...MAGIC, 2, /* kind v8 */ 2, 0, 0,
      ...u32(header.length),
      ...u32(1), // one frame: the SharedArrayBuffer, once
      ...u64(5),
      ...header, ...zeros(padded - header.length), // header at 24
      1, 2, 3, 4, 5, 0, 0, 0, // the buffer's bytes, padded to 8
    ]);
    assertBytes(await encodeToBuffer([-0, sab, sab]), expected);
  });
});

describe('parseLayout', () => {
  it('asks for 16 bytes, then for the frame table, then returns the layout', async () => {
    const bytes = await encodeToBuffer({ a: new Float64Array([1]), b: Buffer.from('xyz') });
    for (let n = 0; n < 16; n++) assert.equal(parseLayout(bytes.subarray(0, n)), 16, `${n} bytes`);
    for (let n = 16; n < 32; n++) assert.equal(parseLayout(bytes.subarray(0, n)), 32, `${n} bytes`);
    // The layout needs only the prefix and frame table, not the header or frames.
    const layout = parseLayout(bytes.subarray(0, 32)) as Layout;
    assert.equal(typeof layout, 'object');
    assert.deepEqual(layout, parseLayout(bytes));
    assert.equal(layout.headerKind, 1);
    assert.equal(layout.headerOffset, 32);
    assert.deepEqual(layout.frameLengths, [8, 3]);
    const headerEnd = Math.ceil((32 + layout.headerLength) / 8) * 8;
    assert.deepEqual(layout.frameOffsets, [headerEnd, headerEnd + 8]);
    assert.equal(layout.trailerOffset, headerEnd + 16);
    assert.equal(layout.totalLength, bytes.byteLength);
    for (const offset of [layout.headerOffset, ...layout.frameOffsets, layout.trailerOffset]) assert.equal(offset % 8, 0);
  });

  it('reads from a view at a non-zero offset', async () => {
    const bytes = await encodeToBuffer(new Uint16Array([1, 2, 3]));
    const container = Buffer.alloc(bytes.byteLength + 5);
    bytes.copy(container, 5);
    const layout = parseLayout(container.subarray(5)) as Layout;
    assert.deepEqual(layout.frameLengths, [6]);
    assert.equal(layout.totalLength, bytes.byteLength);
  });
});
