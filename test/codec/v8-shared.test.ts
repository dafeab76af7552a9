import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import v8 from 'node:v8';
import { decodeVerified, encode, encodeToBuffer } from '../../src/codec/index.js';
import { fill } from './arbitraries.js';

const HEADER_KIND_OFFSET = 5;
const FRAME_COUNT_OFFSET = 12;
const KIND_V8 = 2;

async function roundTrip(value: unknown): Promise<{ decoded: unknown; bytes: Buffer }> {
  const bytes = await encodeToBuffer(value);
  return { decoded: await decodeVerified(bytes), bytes };
}

/** Defines an own data property, even for '__proto__' (plain assignment would set the prototype). */
function define(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function sharedBytes(length: number, seed: number): SharedArrayBuffer {
  const buffer = new SharedArrayBuffer(length);
  fill(new Uint8Array(buffer), seed);
  return buffer;
}

describe('SharedArrayBuffers in values that take the v8 path travel as frames', () => {
  it('{ __proto__: Uint8Array(0), "": SharedArrayBuffer(0) } (fast-check seed 2110865133)', async () => {
    const value = {};
    define(value, '__proto__', new Uint8Array(0));
    define(value, '', new SharedArrayBuffer(0));
    const { decoded, bytes } = await roundTrip(value);
    assert.equal(bytes[HEADER_KIND_OFFSET], KIND_V8);
    assert.equal(bytes.readUInt32LE(FRAME_COUNT_OFFSET), 1);
    assert.equal(Object.getPrototypeOf(decoded), Object.prototype);
    assert.deepEqual(Object.keys(decoded as object), ['__proto__', '']);
    const empty = (decoded as Record<string, unknown>)[''];
    assert.ok(empty instanceof SharedArrayBuffer);
    assert.equal(empty.byteLength, 0);
    assert.deepStrictEqual(decoded, value);
  });

  it('a SharedArrayBuffer comes back as a new SharedArrayBuffer with the same bytes, and is not copied on encode', async () => {
    const shared = sharedBytes(13, 7);
    const value = [-0, shared];
    const encoded = encode(value);
    assert.equal(encoded.frames.length, 1);
    assert.equal(encoded.frames[0].buffer, shared, 'the frame views the value\'s own memory');
    const { decoded } = await roundTrip(value);
    const [zero, out] = decoded as [number, SharedArrayBuffer];
    assert.ok(Object.is(zero, -0));
    assert.ok(out instanceof SharedArrayBuffer);
    assert.notEqual(out, shared);
    assert.ok(Buffer.from(out).equals(Buffer.from(shared)));
    assert.deepStrictEqual(decoded, value);
  });

  it('the same SharedArrayBuffer referenced several times is one frame and one object after decode', async () => {
    const shared = sharedBytes(24, 3);
    const twin = sharedBytes(24, 3); // equal bytes, another buffer: stays another object
    const value = [shared, { again: shared }, new Map([[shared, shared]]), twin, -0];
    const encoded = encode(value);
    assert.equal(encoded.frames.length, 2);
    const [a, { again }, map, b] = (await roundTrip(value)).decoded as [SharedArrayBuffer, { again: unknown }, Map<unknown, unknown>, SharedArrayBuffer];
    assert.ok(a instanceof SharedArrayBuffer && b instanceof SharedArrayBuffer);
    assert.equal(again, a);
    assert.deepEqual([...map], [[a, a]]);
    assert.notEqual(b, a);
    assert.ok(Buffer.from(b).equals(Buffer.from(a)));
  });

  it('a typed array, Buffer and DataView over a SharedArrayBuffer at an offset carry the bytes they cover, as on every path', async () => {
    const shared = sharedBytes(64, 11);
    const ints = new Int32Array(shared, 8, 3);
    const buffer = Buffer.from(shared, 5, 9);
    const view = new DataView(shared, 3, 20);
    const value = { z: -0, shared, ints, buffer, view };
    const encoded = encode(value);
    // Only the SharedArrayBuffer itself is a frame: Node's v8 serializer writes each view's bytes in the header.
    assert.equal(encoded.frames.length, 1);
    const out = (await roundTrip(value)).decoded as typeof value;
    assert.ok(out.shared instanceof SharedArrayBuffer);
    assert.ok(Buffer.from(out.shared).equals(Buffer.from(shared)));
    assert.ok(out.ints instanceof Int32Array);
    assert.deepEqual([...out.ints], [...ints]);
    assert.ok(Buffer.isBuffer(out.buffer));
    assert.ok(out.buffer.equals(buffer));
    assert.ok(out.view instanceof DataView);
    assert.equal(out.view.byteLength, 20);
    assert.ok(Buffer.from(out.view.buffer, out.view.byteOffset, 20).equals(Buffer.from(shared, 3, 20)));
    // Views come back over memory of their own, not over the decoded SharedArrayBuffer.
    for (const decodedView of [out.ints, out.buffer, out.view]) assert.notEqual(decodedView.buffer, out.shared);
    assert.deepStrictEqual(out, value);
  });

  it('views over a SharedArrayBuffer without the buffer itself need no frame', async () => {
    const shared = sharedBytes(32, 5);
    const value = [-0, new Float64Array(shared, 8, 2), new Uint8Array(shared, 1, 3)];
    assert.equal(encode(value).frames.length, 0);
    assert.deepStrictEqual((await roundTrip(value)).decoded, value);
  });

  it('a value without SharedArrayBuffers is v8.serialize\'s bytes, with no frames', async () => {
    const cyclic: Record<string, unknown> = { n: 1 };
    cyclic.self = cyclic;
    const protoKey = {};
    define(protoKey, '__proto__', { p: 1 });
    const values: unknown[] = [
      -0,
      [1, , 3], // eslint-disable-line no-sparse-arrays
      'a\uD800',
      cyclic,
      protoKey,
      [/a+b/gi, new Error('boom'), Object(1), Object('s')],
      { z: -0, bytes: new Uint8Array([1, 2, 3]), f: new Float64Array([1.5]), b: Buffer.from('pooled'), ab: new ArrayBuffer(12) },
      { z: -0, overShared: new Uint16Array(new SharedArrayBuffer(8), 2, 2) },
    ];
    for (const value of values) {
      const encoded = encode(value);
      assert.equal(encoded.layout.headerKind, KIND_V8);
      assert.equal(encoded.frames.length, 0);
      assert.ok(Buffer.from(encoded.header).equals(v8.serialize(value)), 'v8.serialize\'s header');
      const bytes = await encodeToBuffer(value);
      assert.equal(bytes.readUInt32LE(FRAME_COUNT_OFFSET), 0);
    }
  });
});
