import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import v8 from 'node:v8';
import * as arrow from 'apache-arrow';
import fc from 'fast-check';
import { FormatError, TypeDecodeError, UnknownTypeError, registerArrow, registerType } from '../../src/index.js';
import { decodeVerified, encode, encodeToBuffer } from '../../src/codec/index.js';
import { EncodedTypedValue, keepTypedValuesEncoded } from '../../src/codec/types.js';
import { BINARY_KINDS, binaryArb, keyArb } from './arbitraries.js';
import { referenceChecksum } from './checksum-reference.js';
import { assertSameIdentities } from './identities.js';
import { ext, nodeImports } from '../helpers/suite.js';

const HEADER_KIND_OFFSET = 5;
const FRAME_COUNT_OFFSET = 12;
const KIND_V8 = 2;

/** A registered class with meta only (no buffers). */
class Point {
  constructor(
    readonly x: number,
    readonly label = '',
  ) {}
}
registerType(Point, {
  name: 'test.v8.Point',
  encode: (p) => ({ meta: [p.x, p.label], buffers: [] }),
  decode: ({ meta }) => {
    const [x, label] = meta as [number, string];
    return new Point(x, label);
  },
});

/** A registered class whose contents are one buffer: it travels as a frame. */
class Vec {
  constructor(readonly data: Float64Array) {}
}
registerType(Vec, {
  name: 'test.v8.Vec',
  encode: (v) => ({ buffers: [v.data] }),
  decode: ({ buffers: [bytes] }) => new Vec(new Float64Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 8)),
});

/** A registered class with meta and two buffers, one of them often empty. */
class Pair {
  constructor(
    readonly tag: string,
    readonly left: Uint8Array,
    readonly right: Uint8Array,
  ) {}
}
registerType(Pair, {
  name: 'test.v8.Pair',
  encode: (p) => ({ meta: { tag: p.tag }, buffers: [p.left, p.right] }),
  decode: ({ meta, buffers: [left, right] }) => new Pair((meta as { tag: string }).tag, Uint8Array.from(left), Uint8Array.from(right)),
});

/** A registered class whose decode always fails. */
class Brittle {
  constructor(readonly n: number) {}
}
registerType(Brittle, {
  name: 'test.v8.Brittle',
  encode: (b) => ({ meta: b.n, buffers: [] }),
  decode: () => {
    throw new Error('decoder bug');
  },
});

async function roundTrip(value: unknown): Promise<{ decoded: unknown; bytes: Buffer }> {
  const bytes = await encodeToBuffer(value);
  return { decoded: await decodeVerified(bytes), bytes };
}

/** `[, 1]`: an array with a hole. */
function sparseOne(): unknown[] {
  const array: unknown[] = [];
  array[1] = 1;
  return array;
}

function define(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

describe('values of registered types in values that take the v8 path', () => {
  it('[-0, new Point(3)] comes back as [-0, Point { x: 3 }], not a plain object', async () => {
    const { decoded, bytes } = await roundTrip([-0, new Point(3)]);
    assert.equal(bytes[HEADER_KIND_OFFSET], KIND_V8);
    const [zero, point] = decoded as [number, Point];
    assert.ok(Object.is(zero, -0));
    assert.ok(point instanceof Point, 'still a Point');
    assert.equal(point.x, 3);
    assert.deepStrictEqual(decoded, [-0, new Point(3)]);
  });

  it('one instance referenced twice is one decoded instance, as every shared reference on the v8 path', async () => {
    // Two references to one object: the msgpackr path cannot carry that, so the plan takes v8.
    const p = new Point(7, 'shared');
    const value = [p, { again: p }];
    const { decoded, bytes } = await roundTrip(value);
    assert.equal(bytes[HEADER_KIND_OFFSET], KIND_V8);
    const [first, { again }] = decoded as [Point, { again: Point }];
    assert.ok(first instanceof Point);
    assert.equal(first, again, 'the same instance');
    assert.deepStrictEqual(decoded, value);
    // Two equal instances stay two.
    const twins = (await roundTrip([-0, new Point(1), new Point(1)])).decoded as [number, Point, Point];
    assert.notEqual(twins[1], twins[2]);
  });

  it('instances nested in Maps (keys and values), Sets, sparse arrays and cycles', async () => {
    const p = new Point(1);
    const v = new Vec(new Float64Array([1.5, -2, 3]));
    const sparse: unknown[] = [];
    sparse[3] = new Point(4);
    sparse[10] = v;
    const cycle: Record<string, unknown> = { p };
    cycle.self = cycle;
    const value = { map: new Map<unknown, unknown>([[p, 'key'], ['value', v]]), set: new Set([p, new Pair('x', Uint8Array.of(1, 2), new Uint8Array(0))]), sparse, cycle };
    const { decoded } = await roundTrip(value);
    assert.deepStrictEqual(decoded, value);
    assertSameIdentities(value, decoded, { prototypes: true, arrayKeys: true });
    const out = decoded as typeof value;
    assert.ok(!(0 in out.sparse) && out.sparse.length === 11, 'the holes are kept');
    assert.equal(out.cycle.self, out.cycle);
    assert.equal([...out.map.keys()][0], out.cycle.p, 'a Map key and a property share one instance');
  });

  // The v8 serializer writes an Error's cause and an array's named properties: so does this path.
  it('an Error whose cause holds an instance, and an array property beside the indices', async () => {
    const error = new RangeError('out', { cause: { where: new Point(2) } });
    const list = Object.assign([new Point(5)], { extra: new Point(6) });
    const { decoded } = await roundTrip([-0, error, list]);
    const [, outError, outList] = decoded as [number, RangeError, typeof list];
    assert.ok(outError instanceof RangeError);
    assert.equal(outError.message, 'out');
    assert.equal(outError.stack, error.stack);
    assert.deepStrictEqual(outError.cause, { where: new Point(2) });
    assert.ok(outList[0] instanceof Point && outList.extra instanceof Point && outList.extra.x === 6);
  });

  it('buffers travel as frames: viewed in place on encode and on decode, beside SharedArrayBuffers', async () => {
    const data = new Float64Array([1, 2, 3, 4]);
    const shared = new SharedArrayBuffer(16);
    new Uint8Array(shared).fill(9);
    const value = [-0, new Vec(data), shared, shared];
    const encoded = encode(value);
    assert.equal(encoded.frames.length, 2);
    assert.equal(encoded.frames[0].buffer, data.buffer, 'the Vec\'s frame views its own memory');
    assert.equal(encoded.frames[1].buffer, shared, 'then the SharedArrayBuffer');
    const { decoded, bytes } = await roundTrip(value);
    assert.equal(bytes.readUInt32LE(FRAME_COUNT_OFFSET), 2);
    const [, vec, sharedOut, sharedAgain] = decoded as [number, Vec, SharedArrayBuffer, SharedArrayBuffer];
    assert.ok(vec instanceof Vec);
    assert.deepEqual([...vec.data], [1, 2, 3, 4]);
    assert.equal(vec.data.buffer, bytes.buffer, 'the data is a view over the read bytes');
    assert.ok(sharedOut instanceof SharedArrayBuffer && sharedOut === sharedAgain);
    assert.deepEqual([...new Uint8Array(sharedOut)], new Array(16).fill(9));
  });

  it('an Apache Arrow table (a built-in type) referenced twice', async () => {
    registerArrow(arrow);
    const table = arrow.tableFromArrays({ a: Float64Array.from([1, 2, 3]), b: ['x', 'y', 'z'] });
    const { decoded } = await roundTrip([-0, table, { again: table }]);
    const [, out, { again }] = decoded as [number, arrow.Table, { again: arrow.Table }];
    assert.ok(out instanceof arrow.Table);
    assert.equal(out, again);
    assert.deepEqual(out.toArray().map((row) => row.toJSON()), table.toArray().map((row) => row.toJSON()));
  });

  it('user data shaped like a marker stays user data', async () => {
    const lookalike = { name: 'test.v8.Point', meta: [1, ''], first: 0, count: 0 };
    const value = [-0, new Point(1), new Uint8Array(0), lookalike, new Map([['test.v8.Point', new Uint8Array(0)]])];
    const { decoded } = await roundTrip(value);
    assert.deepStrictEqual(decoded, value);
  });

  it('a value without registered types keeps the v8 serializer\'s exact bytes', async () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const proto = {};
    define(proto, '__proto__', [1, 2]);
    for (const value of [[-0], sparseOne(), [cyclic, /re/g, new Error('e', { cause: 'c' })], proto, [-0, new Uint8Array(0), new Float64Array([1])]]) {
      const encoded = encode(value);
      assert.equal(encoded.layout.headerKind, KIND_V8);
      assert.ok(Buffer.from(encoded.header).equals(v8.serialize(value)));
    }
    await fc.assert(
      fc.property(fc.anything({ key: keyArb, maxDepth: 2, maxKeys: 4, withMap: true, withSet: true, withTypedArray: true, withSparseArray: true }), (inner) => {
        const value = [-0, inner];
        assert.ok(Buffer.from(encode(value).header).equals(v8.serialize(value)));
      }),
      { numRuns: 100 },
    );
  });

  it('an unregistered type name is an UnknownTypeError, or an EncodedTypedValue where unknown types are kept', async () => {
    const unknown = new EncodedTypedValue('test.v8.Nobody', { n: 1 }, [Uint8Array.of(1, 2, 3)]);
    const bytes = await encodeToBuffer([-0, unknown, unknown]);
    await assert.rejects(decodeVerified(bytes), (err: unknown) => err instanceof UnknownTypeError && err.code === 'SPW_ERR_UNKNOWN_TYPE' && err.typeName === 'test.v8.Nobody');
    keepTypedValuesEncoded(true);
    try {
      const [, kept, again] = (await decodeVerified(bytes)) as [number, EncodedTypedValue, EncodedTypedValue];
      assert.ok(kept instanceof EncodedTypedValue && kept === again);
      assert.equal(kept.name, 'test.v8.Nobody');
      assert.deepEqual(kept.meta, { n: 1 });
      assert.deepEqual([...kept.buffers[0]], [1, 2, 3]);
      assert.ok((await encodeToBuffer([-0, kept, kept])).equals(bytes), 'kept encoded, it encodes back to the same bytes');
    } finally {
      keepTypedValuesEncoded(false);
    }
  });

  it('a process without the registration reads such a value as UnknownTypeError', async () => {
    const bytes = await encodeToBuffer([-0, new Point(1)]);
    const script = fileURLToPath(new URL(`./fixtures/decode-unregistered${ext}`, import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, [...nodeImports, script, bytes.toString('base64')], { timeout: 60_000 });
    assert.deepEqual(JSON.parse(stdout), { name: 'UnknownTypeError', code: 'SPW_ERR_UNKNOWN_TYPE', typeName: 'test.v8.Point' });
  });

  it('a decode that throws is a TypeDecodeError', async () => {
    const bytes = await encodeToBuffer([-0, new Brittle(1)]);
    await assert.rejects(decodeVerified(bytes), (err: unknown) => err instanceof TypeDecodeError && err.code === 'SPW_ERR_TYPE_DECODE' && err.typeName === 'test.v8.Brittle');
  });

  it('an unregistered instance in an Error\'s cause is refused with a CodecError', async () => {
    class Unregistered {
      x = 1;
    }
    await assert.rejects(encodeToBuffer(new Error('e', { cause: new Unregistered() })), (err: unknown) => (err as { code?: string }).code === 'SPW_ERR_CODEC' && /Unregistered.*cause/.test((err as Error).message));
  });
});

/** What may hang in the generated graphs besides containers and registered instances. */
const leafArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.string({ unit: 'binary', maxLength: 6 }),
  fc.bigInt(),
  fc.date({ noInvalidDate: true }),
  fc.constantFrom(null, undefined, true, -0, NaN),
  binaryArb(BINARY_KINDS, 8),
);

const typedArb: fc.Arbitrary<object> = fc.oneof(
  fc.record({ x: fc.integer(), label: fc.string({ maxLength: 4 }) }).map(({ x, label }) => new Point(x, label)),
  fc.array(fc.double(), { maxLength: 6 }).map((xs) => new Vec(Float64Array.from(xs))),
  fc.record({ tag: fc.string({ maxLength: 3 }), left: fc.uint8Array({ maxLength: 9 }), right: fc.uint8Array({ maxLength: 3 }) }).map(({ tag, left, right }) => new Pair(tag, left, right)),
);

/** Something only the v8 serializer carries exactly, so that the value takes the v8 path. */
const v8OnlyArb: fc.Arbitrary<unknown> = fc.constantFrom(
  () => -0,
  sparseOne,
  () => /x/gi,
  () => new TypeError('t'),
  () => new Number(4),
  () => '\uD800',
  () => {
    const o = {};
    define(o, '__proto__', 1);
    return o;
  },
).map((make) => make());

interface NodeSpec {
  readonly kind: 'array' | 'sparse' | 'object' | 'map' | 'set';
  readonly children: readonly { readonly key: string; readonly ref: number | undefined; readonly typed: number | undefined; readonly leaf: unknown }[];
}

/** Containers whose children are leaves, other containers (shared references, cycles) or registered instances from a pool (one instance in several places). */
function buildGraph({ nodes, pool, forced }: { nodes: readonly NodeSpec[]; pool: readonly object[]; forced: unknown }): unknown {
  const containers: object[] = nodes.map((n) => (n.kind === 'array' || n.kind === 'sparse' ? [] : n.kind === 'object' ? {} : n.kind === 'map' ? new Map() : new Set()));
  nodes.forEach((node, i) => {
    const container = containers[i];
    node.children.forEach(({ key, ref, typed, leaf }, j) => {
      const child = typed !== undefined ? pool[typed % pool.length] : ref !== undefined ? containers[ref % containers.length] : leaf;
      if (container instanceof Map) {
        if (key.length % 2 === 0) container.set(child, leaf);
        else container.set(key, child);
      } else if (container instanceof Set) container.add(child);
      else if (Array.isArray(container)) container[node.kind === 'sparse' ? 2 * j + 1 : j] = child;
      else define(container, key, child);
    });
  });
  return [forced, containers[0], pool[0]];
}

const graphArb: fc.Arbitrary<unknown> = fc
  .record({
    nodes: fc.array(
      fc.record({
        kind: fc.constantFrom('array', 'sparse', 'object', 'map', 'set'),
        children: fc.array(
          fc.record({
            key: keyArb,
            ref: fc.option(fc.nat({ max: 5 }), { nil: undefined }),
            typed: fc.oneof({ weight: 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.nat({ max: 3 }) }),
            leaf: leafArb,
          }),
          { maxLength: 4 },
        ),
      }),
      { minLength: 1, maxLength: 5 },
    ),
    pool: fc.array(typedArb, { minLength: 1, maxLength: 3 }),
    forced: v8OnlyArb,
  })
  .map(buildGraph);

function resealed(bytes: Uint8Array): Buffer {
  const out = Buffer.from(bytes);
  const trailer = out.byteLength - 8;
  out.writeBigUInt64LE(referenceChecksum(out.subarray(0, trailer)), trailer);
  return out;
}

describe('registered instances anywhere in v8-path values (properties)', () => {
  it('round-trip exactly: classes, fields, shared references and cycles', async () => {
    await fc.assert(
      fc.asyncProperty(graphArb, async (value) => {
        const { decoded, bytes } = await roundTrip(value);
        assert.equal(bytes[HEADER_KIND_OFFSET], KIND_V8);
        assert.deepStrictEqual(decoded, value);
        assertSameIdentities(value, decoded, { prototypes: true, arrayKeys: true });
      }),
      { numRuns: 200 },
    );
  });

  it('bytes changed anywhere, checksum made valid again: a value or a FormatError', async () => {
    await fc.assert(
      fc.asyncProperty(graphArb, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 255 })), { minLength: 1, maxLength: 3 }), async (value, flips) => {
        const bytes = Buffer.from(await encodeToBuffer(value));
        for (const [at, x] of flips) bytes[at % (bytes.length - 8)] ^= x;
        try {
          await decodeVerified(resealed(bytes));
        } catch (err) {
          assert.ok(err instanceof FormatError, `not a FormatError: ${String(err)}`);
        }
      }),
      { numRuns: 200 },
    );
  });
});
