import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import {
  CodecError,
  DiskTier,
  FormatError,
  InvalidArgumentError,
  SpillStore,
  TypeDecodeError,
  TypeRegistrationError,
  registerType,
} from '../../src/index.js';
import { decodeVerified, encodeToBuffer } from '../../src/transfer/index.js';
import { sizeof } from '../../src/codec/index.js';
import { tempDir } from '../helpers/temp-dir.js';
import { ext, nodeImports } from '../helpers/suite.js';

/** A user's class: a dense matrix whose data lives in one Float64Array. */
class Matrix {
  constructor(
    readonly rows: number,
    readonly cols: number,
    readonly data: Float64Array,
  ) {}
}

registerType(Matrix, {
  name: 'test.Matrix',
  encode: (m) => ({ meta: [m.rows, m.cols], buffers: [m.data] }),
  decode: ({ meta, buffers: [bytes] }) => {
    const [rows, cols] = meta as [number, number];
    return new Matrix(rows, cols, new Float64Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 8));
  },
});

/** A class whose decode always fails: what a buggy registration looks like to the store. */
class Brittle {
  constructor(readonly bytes: Uint8Array) {}
}
registerType(Brittle, {
  name: 'test.Brittle',
  encode: (b) => ({ buffers: [b.bytes] }),
  decode: () => {
    throw new Error('decoder bug');
  },
  sizeof: (b) => b.bytes.byteLength,
});

function matrix(rows: number, cols: number, seed: number): Matrix {
  const data = new Float64Array(rows * cols);
  for (let i = 0; i < data.length; i++) data[i] = seed + i / 7;
  return new Matrix(rows, cols, data);
}

describe('registered value types', () => {
  it('a registered class round-trips, its buffer read back as a view over the read bytes', async () => {
    const m = matrix(30, 40, 1);
    const bytes = await encodeToBuffer(m);
    const back = (await decodeVerified(bytes)) as Matrix;
    assert.ok(back instanceof Matrix);
    assert.equal(back.rows, 30);
    assert.equal(back.cols, 40);
    assert.deepEqual(back.data, m.data);
    assert.equal(back.data.buffer, bytes.buffer, 'the data is a view, not a copy');
  });

  it('registered values nested in plain data, beside typed arrays, round-trip', async () => {
    const value = { name: 'pair', first: matrix(2, 3, 5), raw: new Uint8Array([1, 2, 3]), list: [matrix(1, 1, 9), 'x'] };
    const back = (await decodeVerified(await encodeToBuffer(value))) as typeof value;
    assert.ok(back.first instanceof Matrix && back.list[0] instanceof Matrix);
    assert.deepEqual(back, value);
  });

  it('sizeof counts a registered value by its buffers', () => {
    const m = matrix(100, 10, 0);
    const size = sizeof(m);
    assert.ok(size >= 8000 && size < 8000 + 64, `sizeof ${size}`);
    assert.equal(sizeof(new Brittle(new Uint8Array(5000))) >= 5000, true);
  });

  it('unregistered class instances are still refused with a CodecError', async () => {
    class Unknown {
      x = 1;
    }
    await assert.rejects(encodeToBuffer(new Unknown()), (err: unknown) => err instanceof CodecError && /Unknown/.test(err.message));
  });

  it('a name or a class registered twice with a different partner is refused; the same pair again is accepted', () => {
    class Other {}
    const codec = { encode: () => ({ buffers: [] }), decode: () => new Other() };
    assert.throws(() => registerType(Other, { name: 'test.Matrix', ...codec }), (err: unknown) => err instanceof TypeRegistrationError && err.code === 'SPW_ERR_TYPE_REGISTRATION' && /Matrix/.test(err.message));
    assert.throws(
      () => registerType(Matrix, { name: 'test.Matrix2', encode: () => ({ buffers: [] }), decode: () => matrix(0, 0, 0) }),
      (err: unknown) => err instanceof TypeRegistrationError && /already registered as "test.Matrix"/.test(err.message),
    );
    registerType(Matrix, { name: 'test.Matrix', encode: () => ({ buffers: [] }), decode: () => matrix(0, 0, 0) });
    assert.throws(() => registerType(Other, { name: 'spillway.mine', ...codec }), InvalidArgumentError);
    assert.throws(() => registerType(Other, { name: '', ...codec }), InvalidArgumentError);
    assert.throws(() => registerType(Other, { name: 'ok', encode: 1 as never, decode: codec.decode }), InvalidArgumentError);
  });

  it('an encode that throws or returns no buffers is a CodecError naming the type', async () => {
    class Bad {}
    registerType(Bad, { name: 'test.Bad', encode: () => ({ buffers: 'nope' as never }), decode: () => new Bad() });
    class Throws {}
    registerType(Throws, {
      name: 'test.Throws',
      encode: () => {
        throw new Error('boom');
      },
      decode: () => new Throws(),
    });
    await assert.rejects(encodeToBuffer(new Bad()), (err: unknown) => err instanceof CodecError && /test\.Bad/.test(err.message));
    await assert.rejects(encodeToBuffer({ inner: new Throws() }), (err: unknown) => err instanceof CodecError && /test\.Throws.*boom/.test(err.message));
  });

  it('a decode that throws is a TypeDecodeError; in a store the value stays on disk and other values are untouched', async (t) => {
    const dir = await tempDir(t);
    const store = await SpillStore.open({ memoryLimit: '64 MiB', tiers: [new DiskTier({ directory: dir })] });
    t.after(() => store.close());
    store.set('brittle', new Brittle(new Uint8Array(4096).fill(3)));
    store.set('fine', matrix(64, 64, 2));
    await store.evict(Infinity);
    assert.equal(store.stats().memory.count, 0);
    for (let attempt = 0; attempt < 2; attempt++) {
      await assert.rejects(store.get('brittle'), (err: unknown) => err instanceof TypeDecodeError && err.code === 'SPW_ERR_TYPE_DECODE' && err.typeName === 'test.Brittle' && err instanceof FormatError);
    }
    assert.ok(store.has('brittle'), 'the encoded copy is kept');
    const fine = (await store.get('fine')) as Matrix;
    assert.deepEqual(fine, matrix(64, 64, 2));
  });

  it('a process without the registration reads the value as UnknownTypeError', async () => {
    const bytes = await encodeToBuffer(matrix(2, 2, 1));
    const script = fileURLToPath(new URL(`./fixtures/decode-unregistered${ext}`, import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, [...nodeImports, script, bytes.toString('base64')], { timeout: 60_000 });
    assert.deepEqual(JSON.parse(stdout), { name: 'UnknownTypeError', code: 'SPW_ERR_UNKNOWN_TYPE', typeName: 'test.Matrix' });
  });
});
