import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { FORMAT_VERSION, decodeVerified, encode, encodeToBuffer, layoutOfBytes, parseLayout } from '../../src/codec/index.js';
import { MAX_ENCODED_BYTES } from '../../src/codec/encode.js';
import { referenceChecksum } from './checksum-reference.js';
import { ChecksumError, CodecError, FormatError, SpillwayError } from '../../src/errors.js';
import { binaryArb } from './arbitraries.js';

/** Asserts that `fn` throws (or rejects with) a CodecError whose message matches `message`. */
async function assertCodecError(fn: () => unknown, message?: RegExp): Promise<CodecError> {
  let caught: unknown;
  try {
    await fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof CodecError, `expected a CodecError, got ${String(caught)}`);
  assert.equal(caught.code, 'SPW_ERR_CODEC');
  assert.ok(caught instanceof SpillwayError);
  if (message !== undefined) assert.match(caught.message, message);
  return caught;
}

/** decodeVerified must reject with exactly ChecksumError or FormatError. */
async function assertRejectsCorrupt(bytes: Uint8Array, note: string): Promise<void> {
  let result: unknown;
  try {
    result = await decodeVerified(bytes);
  } catch (err) {
    assert.ok(err instanceof ChecksumError || err instanceof FormatError, `${note}: unexpected ${String(err)}`);
    return;
  }
  assert.fail(`${note}: decoded to ${String(result)} instead of failing`);
}

/** Rewrites the trailer so the checksum matches: for malformed-but-checksummed bytes. */
function resealed(bytes: Uint8Array): Buffer {
  const out = Buffer.from(bytes);
  const trailer = out.byteLength - 8;
  out.writeBigUInt64LE(referenceChecksum(out.subarray(0, trailer)), trailer);
  return out;
}

/** A 16-byte prefix plus frame table, as parseLayout reads it. */
function prefix(fields: { magic?: number; version?: number; kind?: number; header?: number; frames?: bigint[]; count?: number }): Buffer {
  const frames = fields.frames ?? [];
  const out = Buffer.alloc(16 + 8 * frames.length);
  out.writeUInt32LE(fields.magic ?? 0x59575053, 0);
  out.writeUInt8(fields.version ?? FORMAT_VERSION, 4);
  out.writeUInt8(fields.kind ?? 1, 5);
  out.writeUInt32LE(fields.header ?? 0, 8);
  out.writeUInt32LE(fields.count ?? frames.length, 12);
  frames.forEach((length, i) => out.writeBigUInt64LE(length, 16 + 8 * i));
  return out;
}

const samples: [string, unknown][] = [
  ['Float64Array', new Float64Array([1, 2, 3])],
  ['odd Buffer', Buffer.from('abcde')],
  ['empty Uint8Array', new Uint8Array(0)],
  ['msgpack object', { a: 1, s: 'text', n: [null, true] }],
  ['msgpack with frames', { f: new Int32Array([1, -1]), b: Buffer.from('xyz') }],
  ['v8 value', { z: -0, r: /x/ }],
  ['v8 value with SharedArrayBuffers', [-0, new SharedArrayBuffer(3), new SharedArrayBuffer(12)]],
];

describe('values that cannot be encoded give CodecError', () => {
  it('a function', async () => {
    await assertCodecError(() => encode(() => 1), /function/);
    await assertCodecError(() => encodeToBuffer(function named() {}), /function/);
  });

  it('a symbol, as a value and as a key', async () => {
    await assertCodecError(() => encode(Symbol('s')), /symbol/);
    await assertCodecError(() => encode({ [Symbol('k')]: 1 }), /symbol/);
  });

  it('a class instance, naming the class', async () => {
    await assertCodecError(() => encode(new (class Point {})()), /Point/);
    await assertCodecError(() => encode([new (class Vec3 {
      x = 1;
    })()]), /Vec3.*value\[0\]/);
  });

  it('a net.Socket', async () => {
    const socket = new net.Socket();
    try {
      await assertCodecError(() => encode({ conn: socket }), /Socket.*value\.conn/);
    } finally {
      socket.destroy();
    }
  });

  it('other non-data objects: Promise, WeakMap, a typed-array subclass', async () => {
    await assertCodecError(() => encode(Promise.resolve(1)), /Promise/);
    await assertCodecError(() => encode(new WeakMap()), /WeakMap/);
    await assertCodecError(() => encode(new (class Bytes extends Uint8Array {})(4)), /Bytes/);
  });

  it('a function nested deep in an object: the message names the path', async () => {
    const value = { a: { b: [0, 1, { c: { fn: () => 2 } }] } };
    await assertCodecError(() => encode(value), /value\.a\.b\[2\]\.c\.fn/);
    await assertCodecError(() => encode(new Map([['k', { deep: [Symbol.iterator] }]])), /symbol.*deep\[0\]/);
    await assertCodecError(() => encode(new Set([1, () => 1])), /function.*<item>/);
  });

  it('a value too long to read back (over MAX_ENCODED_BYTES encoded), at the top or inside, before a byte of it is read', async (t) => {
    if (MAX_ENCODED_BYTES > 2 ** 32) {
      t.skip(`this runtime's buffers hold ${MAX_ENCODED_BYTES} bytes`);
      return;
    }
    // 4 GiB of address space each: their pages are never touched (encode only lays them out).
    const limit = MAX_ENCODED_BYTES;
    const over = new Float64Array(limit / 8 + 1);
    await assertCodecError(() => encode(over), new RegExp(`Float64Array.*${limit + 48} bytes.*limit of ${limit}`));
    await assertCodecError(() => encode({ part: over }), /limit/);
    await assertCodecError(() => encode(new ArrayBuffer(limit + 8)), /ArrayBuffer.*limit/);
    // The largest binary value that fits: 32 bytes of prefix, the frame, 8 of trailer.
    const largest = encode(new Float64Array((limit - 40) / 8));
    assert.equal(largest.byteLength, limit);
    await assertCodecError(() => encode(new Float64Array((limit - 40) / 8 + 1)), /limit/);
  });

  it('a function next to a cycle (the v8 path would not save it)', async () => {
    const value: Record<string, unknown> = { fn: () => 1 };
    value.self = value;
    await assertCodecError(() => encodeToBuffer(value), /function/);
  });

  it('the error is thrown by encode(), before any byte is produced', () => {
    assert.throws(() => encode({ x: () => 1 }), CodecError);
  });
});

describe('corrupt bytes: ChecksumError or FormatError, never garbage, never another error', () => {
  for (const [name, value] of samples) {
    it(`${name}: every single-byte flip at every position`, async () => {
      const bytes = await encodeToBuffer(value);
      for (let position = 0; position < bytes.byteLength; position++) {
        for (const mask of [0x01, 0x80, 0xff]) {
          const copy = Buffer.from(bytes);
          copy[position] ^= mask;
          await assertRejectsCorrupt(copy, `flip 0x${mask.toString(16)} at ${position}/${bytes.byteLength}`);
        }
      }
    });
  }

  it('property: any value, any position, any non-zero xor', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(binaryArb(), fc.anything({ maxDepth: 2, withTypedArray: true, withMap: true, withBigInt: true })),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        async (value, at, mask) => {
          const bytes = await encodeToBuffer(value);
          const position = at % bytes.byteLength;
          bytes[position] ^= mask;
          await assertRejectsCorrupt(bytes, `xor 0x${mask.toString(16)} at ${position}`);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a checksum mismatch is a ChecksumError with code, expected and actual', async () => {
    const bytes = await encodeToBuffer({ a: 'payload' });
    bytes[20] ^= 1;
    const err = await decodeVerified(bytes, 'test value').then(
      () => assert.fail('decoded'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ChecksumError);
    assert.equal(err.code, 'SPW_ERR_CHECKSUM');
    assert.notEqual(err.expected, err.actual);
    assert.equal(err.expected, bytes.readBigUInt64LE(bytes.byteLength - 8));
    assert.match(err.message, /test value/);
  });

  for (const [name, value] of samples) {
    it(`${name}: truncation at every length gives FormatError`, async () => {
      const bytes = await encodeToBuffer(value);
      for (let length = 0; length < bytes.byteLength; length++) {
        await assert.rejects(decodeVerified(bytes.subarray(0, length)), FormatError, `length ${length}`);
      }
      // Extra bytes after the value are no better.
      await assert.rejects(decodeVerified(Buffer.concat([bytes, Buffer.alloc(8)])), FormatError);
    });
  }

  it('checksummed but malformed bodies give FormatError', async () => {
    // Binary value whose tag is unknown.
    const unknownTag = await encodeToBuffer(new Uint8Array(8));
    unknownTag[layoutOfBytes(unknownTag).headerOffset] = 99;
    await assert.rejects(decodeVerified(resealed(unknownTag)), FormatError);
    // A Float64Array frame that is not a whole number of elements.
    const ragged = await encodeToBuffer(new Uint8Array(7));
    ragged[layoutOfBytes(ragged).headerOffset] = 10; // Float64Array's tag
    await assert.rejects(decodeVerified(resealed(ragged)), FormatError);
    // msgpack header referring to a frame that is not there: FrameRef index 0 -> 5.
    const ref = await encodeToBuffer({ f: new Uint8Array(3) });
    const at = ref.indexOf(Buffer.from([0x92, 0x00, 0x02]));
    assert.ok(at > 0);
    ref[at + 1] = 5;
    await assert.rejects(decodeVerified(resealed(ref)), FormatError);
    // v8 header naming a transferred buffer that is not a frame: id 0 -> 5.
    const transferred = await encodeToBuffer([-0, new SharedArrayBuffer(8)]);
    const tag = transferred.indexOf(Buffer.from([0x74, 0x00]), layoutOfBytes(transferred).headerOffset);
    assert.ok(tag > 0);
    transferred[tag + 1] = 5;
    await assert.rejects(decodeVerified(resealed(transferred)), FormatError);
  });

  it('property: random header bytes with a valid checksum decode or give FormatError', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(1, 2), fc.uint8Array({ minLength: 1, maxLength: 40 }), async (kind, header) => {
        const layoutBytes = prefix({ kind, header: header.byteLength });
        const padded = Math.ceil((16 + header.byteLength) / 8) * 8;
        const bytes = Buffer.alloc(padded + 8);
        layoutBytes.copy(bytes);
        bytes.set(header, 16);
        try {
          await decodeVerified(resealed(bytes));
        } catch (err) {
          assert.ok(err instanceof FormatError, String(err));
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('parseLayout and layoutOfBytes reject impossible layouts', () => {
  it('wrong magic', async () => {
    assert.throws(() => parseLayout(prefix({ magic: 0x12345678 })), FormatError);
    const bytes = await encodeToBuffer(1);
    bytes.write('SPWX', 0, 'latin1');
    await assert.rejects(decodeVerified(resealed(bytes)), /bad magic/);
  });

  it('wrong version', async () => {
    // Version 1 (a CRC-32C trailer) included: its bytes are refused, not misread.
    for (const version of [0, 1, 3, 255]) {
      assert.throws(() => parseLayout(prefix({ version })), (err: unknown) => err instanceof FormatError && /version/.test(err.message));
      const bytes = await encodeToBuffer({ v: 1 });
      bytes[4] = version;
      await assert.rejects(decodeVerified(resealed(bytes)), FormatError);
    }
  });

  it('unknown header kind; a binary value with other than one frame', () => {
    assert.throws(() => parseLayout(prefix({ kind: 3 })), /header kind/);
    assert.throws(() => parseLayout(prefix({ kind: 0, header: 1, frames: [] })), /exactly one frame/);
    assert.throws(() => parseLayout(prefix({ kind: 0, header: 1, frames: [1n, 1n] })), /exactly one frame/);
  });

  it('a frame length above the buffer: FormatError from the prefix alone, before allocating', () => {
    const max = 1024 * 1024;
    for (const length of [BigInt(max), 2n ** 40n, 2n ** 53n + 1n, 2n ** 64n - 1n]) {
      const bytes = prefix({ frames: [length] });
      assert.throws(() => parseLayout(bytes, max), FormatError, String(length));
      assert.throws(() => layoutOfBytes(bytes), FormatError);
    }
    // The same length within the limit is a layout that asks for that many bytes.
    const ok = parseLayout(prefix({ frames: [100n] }), max);
    assert.ok(typeof ok === 'object');
    assert.equal(ok.frameLengths[0], 100);
  });

  it('a frame count or header length the limit cannot hold: FormatError before reading the frame table', () => {
    // Only the 16 fixed bytes are present; a reader must not wait for 8 MiB of frame table.
    assert.throws(() => parseLayout(prefix({ count: 1 << 20 }), 4096), FormatError);
    assert.throws(() => parseLayout(prefix({ count: (1 << 20) + 1 })), /too many frames/);
    assert.throws(() => parseLayout(prefix({ header: 0xffffffff }), 4096), FormatError);
    // Without a limit a short prefix just asks for the frame table.
    assert.equal(parseLayout(prefix({ count: 3 })), 16 + 24);
  });

  it('every byte of the trailer counts: the checksum is 64 bits', async () => {
    for (let i = 1; i <= 8; i++) {
      const bytes = await encodeToBuffer([1, 2]);
      bytes[bytes.byteLength - i] ^= 0x80;
      await assert.rejects(decodeVerified(bytes), ChecksumError, `trailer byte ${8 - i}`);
    }
  });
});
