import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import * as arrow from 'apache-arrow';
import {
  Bool,
  Dictionary,
  Field,
  Float64,
  Int32,
  Int64,
  List,
  RecordBatch,
  Struct,
  Table,
  TimestampMillisecond,
  Utf8,
  Vector,
  makeTable,
  tableFromArrays,
  vectorFromArray,
} from 'apache-arrow';
import { CodecError, DiskTier, FormatError, InvalidArgumentError, SpillStore, TypeDecodeError, registerArrow } from '../../src/index.js';
import { sizeof } from '../../src/codec/index.js';
import { DataClient, DataServer, decodeVerified, encodeToBuffer } from '../../src/transfer/index.js';
import { referenceChecksum } from './checksum-reference.js';
import { tempDir } from '../helpers/temp-dir.js';
import { ext, nodeImports } from '../helpers/suite.js';

/** Rows as plain data, bigints kept: what must survive a round trip. */
function rows(table: Table): unknown[] {
  return table.toArray().map((row) => JSON.parse(JSON.stringify(row.toJSON(), (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))));
}

const nullable = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: null, freq: 4 });

/** A column of one of the types the IPC format carries, with nulls. */
const columnArb = fc.oneof(
  fc.array(nullable(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 })), { minLength: 1, maxLength: 40 }).map((v) => vectorFromArray(v, new Int32())),
  fc.array(nullable(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })), { minLength: 1, maxLength: 40 }).map((v) => vectorFromArray(v, new Int64())),
  fc.array(nullable(fc.double({ noNaN: true })), { minLength: 1, maxLength: 40 }).map((v) => vectorFromArray(v, new Float64())),
  fc.array(nullable(fc.boolean()), { minLength: 1, maxLength: 40 }).map((v) => vectorFromArray(v, new Bool())),
  fc.array(nullable(fc.string({ maxLength: 12 })), { minLength: 1, maxLength: 40 }).map((v) => vectorFromArray(v, new Utf8())),
  fc.array(nullable(fc.constantFrom('AIR', 'MAIL', 'SHIP', 'RAIL')), { minLength: 1, maxLength: 40 }).map((v) => vectorFromArray(v, new Dictionary(new Utf8(), new Int32()))),
  fc.array(nullable(fc.array(fc.integer({ min: -1000, max: 1000 }), { maxLength: 5 })), { minLength: 1, maxLength: 30 }).map((v) =>
    vectorFromArray(v, new List(new Field('item', new Int32(), true))),
  ),
  fc.array(nullable(fc.record({ a: fc.integer({ min: 0, max: 99 }), b: fc.string({ maxLength: 4 }) })), { minLength: 1, maxLength: 30 }).map((v) =>
    vectorFromArray(v, new Struct([new Field('a', new Int32(), true), new Field('b', new Utf8(), true)])),
  ),
  fc.array(nullable(fc.integer({ min: 0, max: 2 ** 40 })), { minLength: 1, maxLength: 30 }).map((v) => vectorFromArray(v, new TimestampMillisecond())),
);

/** A table of 1 to 4 columns cut to one length. */
const tableArb = fc.array(columnArb, { minLength: 1, maxLength: 4 }).map((columns) => {
  const length = Math.min(...columns.map((c) => c.length));
  return new Table(Object.fromEntries(columns.map((c, i) => [`c${i}`, c.slice(0, length)])));
});

// tsx gives this file its own instance of apache-arrow, not the one Node resolves for Spillway.
registerArrow(arrow);

describe('Apache Arrow values', () => {
  it('registerArrow refuses what is not the apache-arrow module', () => {
    assert.throws(() => registerArrow({ Table: class {} }), InvalidArgumentError);
  });

  it('tables of every IPC type, with nulls, round-trip exactly (property)', async () => {
    await fc.assert(
      fc.asyncProperty(tableArb, async (table) => {
        const back = (await decodeVerified(await encodeToBuffer(table))) as Table;
        assert.ok(back instanceof Table, 'decoded as the application’s own Table class');
        assert.equal(back.schema.fields.map((f) => String(f.type)).join(), table.schema.fields.map((f) => String(f.type)).join());
        assert.deepEqual(rows(back), rows(table));
      }),
      { numRuns: 60 },
    );
  });

  it('a column of each other type the IPC format carries round-trips exactly, nulls included', async () => {
    const A = arrow;
    const item = (type: arrow.DataType): arrow.Field => new A.Field('item', type, true);
    const union = (type: arrow.Union): arrow.Vector => {
      const builder = A.makeBuilder({ type, nullValues: [null], valueToChildTypeId: (_b: unknown, v: unknown) => (typeof v === 'number' ? 0 : 1) } as never);
      for (const v of [1, 'a', null, 3]) builder.append(v as never);
      return builder.finish().toVector();
    };
    const columns: Record<string, arrow.Vector> = {
      int8: A.vectorFromArray([1, null, -128, 127], new A.Int8()),
      uint16: A.vectorFromArray([1, null, 65_535, 0], new A.Uint16()),
      uint64: A.vectorFromArray([1n, null, 2n ** 64n - 1n, 0n], new A.Uint64()),
      float16: A.vectorFromArray([1.5, null, -2, 0], new A.Float16()),
      float32: A.vectorFromArray([1.5, null, -2, 0], new A.Float32()),
      decimal: A.makeVector(A.makeData({ type: new A.Decimal(2, 15, 128), length: 4, nullCount: 0, data: Uint32Array.of(12_345, 0, 0, 0, ...new Array<number>(4).fill(0xffffffff), 1, 2, 3, 4, 0, 0, 0, 0) })),
      dateDay: A.vectorFromArray([new Date(3 * 86_400_000), null, new Date(0), new Date(-86_400_000)], new A.DateDay()),
      dateMillisecond: A.vectorFromArray([new Date(3 * 86_400_000), null, new Date(0), new Date(1)], new A.DateMillisecond()),
      timeMillisecond: A.vectorFromArray([1000, null, 0, 86_399_999], new A.TimeMillisecond()),
      timestampMicrosecond: A.vectorFromArray([1000, null, 0, 2 ** 40], new A.TimestampMicrosecond()),
      durationNanosecond: A.vectorFromArray([1000n, null, 0n, -(2n ** 62n)], new A.DurationNanosecond()),
      intervalDayTime: A.vectorFromArray([Int32Array.of(1, 2), null, Int32Array.of(0, 0), Int32Array.of(-1, 5)], new A.IntervalDayTime()),
      binary: A.vectorFromArray([Uint8Array.of(1, 2), null, new Uint8Array(0), Uint8Array.of(255)], new A.Binary()),
      largeBinary: A.vectorFromArray([Uint8Array.of(1, 2), null, new Uint8Array(0), Uint8Array.of(255)], new A.LargeBinary()),
      fixedSizeBinary: A.vectorFromArray([Uint8Array.of(1, 2), null, Uint8Array.of(0, 0), Uint8Array.of(9, 9)], new A.FixedSizeBinary(2)),
      largeUtf8: A.vectorFromArray(['a', null, '', 'ccc'], new A.LargeUtf8()),
      fixedSizeList: A.vectorFromArray([[1, 2], null, [3, null], [5, 6]], new A.FixedSizeList(2, item(new A.Int32()))),
      map: A.vectorFromArray(
        [new Map([['a', 1]]), null, new Map(), new Map([['b', null]])],
        new A.Map_<arrow.Utf8, arrow.Int32>(new A.Field('entries', new A.Struct<{ key: arrow.Utf8; value: arrow.Int32 }>([new A.Field('key', new A.Utf8(), false), new A.Field('value', new A.Int32(), true)]), false)),
      ),
      sparseUnion: union(new A.SparseUnion([0, 1], [item(new A.Int32()), item(new A.Utf8())])),
      denseUnion: union(new A.DenseUnion([0, 1], [item(new A.Int32()), item(new A.Utf8())])),
      null: A.vectorFromArray([null, null, null, null], new A.Null()),
      listOfDictionary: A.vectorFromArray([['x'], null, ['x', null], ['y']], new A.List(item(new A.Dictionary(new A.Utf8(), new A.Int8())))),
    };
    const table = new Table(columns);
    const back = (await decodeVerified(await encodeToBuffer(table))) as Table;
    const types = (t: Table): string[] => t.schema.fields.map((f) => `${f.name}: ${String(f.type)} ${f.type.typeId} ${String((f.type as { mode?: unknown }).mode)}`);
    assert.deepEqual(types(back), types(table));
    assert.deepEqual(rows(back), rows(table));
  });

  it('a table of several batches, a record batch and a vector round-trip as what they are', async () => {
    const a = tableFromArrays({ id: new Int32Array([1, 2, 3]), name: ['x', 'y', null] });
    const b = tableFromArrays({ id: new Int32Array([4, 5]), name: ['z', 'w'] });
    const table = a.concat(b);
    const back = (await decodeVerified(await encodeToBuffer(table))) as Table;
    assert.equal(back.batches.length, 2);
    assert.deepEqual(rows(back), rows(table));

    const batch = a.batches[0];
    const batchBack = (await decodeVerified(await encodeToBuffer(batch))) as RecordBatch;
    assert.ok(batchBack instanceof RecordBatch);
    assert.deepEqual(batchBack.toArray().map((r) => r.toJSON()), batch.toArray().map((r) => r.toJSON()));

    const vector = vectorFromArray(['a', null, 'c'], new Dictionary(new Utf8(), new Int32()));
    const vectorBack = (await decodeVerified(await encodeToBuffer({ v: vector }))) as { v: Vector };
    assert.ok(vectorBack.v instanceof Vector);
    assert.deepEqual(vectorBack.v.toArray(), vector.toArray());
  });

  it('reads are zero-copy: a decoded column is a view over the read bytes', async () => {
    const table = tableFromArrays({ x: new Float64Array(10_000).map((_, i) => i * 0.5) });
    const bytes = await encodeToBuffer(table);
    const back = (await decodeVerified(bytes)) as Table;
    const values = back.getChild('x')!.data[0].values as Float64Array;
    assert.equal(values.buffer, bytes.buffer, 'the column views the read buffer');
    assert.equal(values[9_999], 9_999 * 0.5);
  });

  it('sizes are exact: the bytes of the value’s buffers', () => {
    const table = makeTable({ x: new Float64Array(1000), y: new Int32Array(1000) });
    assert.equal(sizeof(table), 32 + 8000 + 4000);
    assert.equal(sizeof(table.getChild('y')!), 32 + 4000);
  });

  it('spilled to disk and read back through a store, beside plain values', async (t) => {
    const dir = await tempDir(t);
    const store = await SpillStore.open({ memoryLimit: '64 MiB', tiers: [new DiskTier({ directory: dir })] });
    t.after(() => store.close());
    const table = tableFromArrays({ k: new Int32Array(50_000).map((_, i) => i % 97), v: new Float64Array(50_000).map((_, i) => i / 3) });
    store.set('t', table);
    store.set('plain', { a: 1 });
    await store.evict(Infinity);
    assert.equal(store.stats().memory.count, 0);
    const back = (await store.get('t')) as Table;
    assert.equal(back.numRows, 50_000);
    assert.deepEqual(back.getChild('v')!.toArray(), table.getChild('v')!.toArray());
  });

  it('served to a peer from disk and received to disk, decoded by neither store, read back as the same table', async (t) => {
    const source = await SpillStore.open({ memoryLimit: '64 MiB', monitorIntervalMs: 0, directory: await tempDir(t) });
    const target = await SpillStore.open({ memoryLimit: '64 MiB', monitorIntervalMs: 0, directory: await tempDir(t) });
    const server = await DataServer.listen(source);
    t.after(async () => {
      await server.close();
      await Promise.all([source.close(), target.close()]);
    });
    const value = new Table({
      id: arrow.makeVector(BigInt64Array.from({ length: 20_000 }, (_, i) => BigInt(i) * 4_000_000_000n)),
      name: vectorFromArray(
        Array.from({ length: 20_000 }, (_, i) => (i % 11 === 0 ? null : ['AIR', 'MAIL', 'SHIP'][i % 3])),
        new Dictionary(new Utf8(), new Int32()),
      ),
      tags: vectorFromArray(
        Array.from({ length: 20_000 }, (_, i) => (i % 7 === 0 ? null : [i, i + 1])),
        new List(new Field('item', new Int32(), true)),
      ),
    });
    source.set('t', value);
    source.set('plain', { a: 1 });
    await source.evict(Infinity);
    assert.equal(source.where('t'), 'disk');
    const sourceBefore = source.stats().counters;

    const result = await new DataClient({ diskThresholdBytes: 65_536 }).fetch(server.address, ['t', 'plain'], target);
    assert.deepEqual(result.fetched.sort(), ['plain', 't']);
    assert.equal(result.toDisk, 1, 'the table went straight to disk');

    const sourceAfter = source.stats().counters;
    assert.equal(sourceAfter.decodeSeconds, sourceBefore.decodeSeconds, 'the holder decoded nothing');
    assert.equal(sourceAfter.diskReads, sourceBefore.diskReads, 'the holder loaded nothing into memory');
    assert.ok(server.stats().servedFromDiskBytes > 65_536, 'served from the holder’s disk');
    assert.equal(target.where('t'), 'disk');
    assert.equal(target.stats().counters.decodeSeconds, 0, 'the receiver decoded nothing');

    const back = (await target.get('t')) as Table;
    assert.ok(back instanceof Table);
    assert.equal(String(back.schema.fields.map((f) => f.type)), String(value.schema.fields.map((f) => f.type)));
    assert.equal(back.numRows, value.numRows);
    assert.deepEqual(rows(back), rows(value), 'the same rows, nulls, 64-bit values and lists');
    assert.deepEqual(await target.get('plain'), { a: 1 });
  });

  it('a corrupted IPC stream is a TypeDecodeError (a FormatError), never a wrong table', async () => {
    const table = tableFromArrays({ id: new Int32Array([1, 2, 3, 4]), s: ['a', 'bb', 'ccc', null] });
    const bytes = Buffer.from(await encodeToBuffer(table));
    let decodeErrors = 0;
    // Corrupt each byte of the IPC metadata in turn (first frames), reseal the checksum.
    for (let at = 40; at < Math.min(bytes.length - 8, 400); at += 3) {
      const copy = Buffer.from(bytes);
      copy[at] ^= 0xff;
      copy.writeBigUInt64LE(referenceChecksum(copy.subarray(0, copy.length - 8)), copy.length - 8);
      try {
        await decodeVerified(copy);
      } catch (err) {
        assert.ok(err instanceof FormatError, `got ${String(err)}`);
        if (err instanceof TypeDecodeError) decodeErrors++;
      }
    }
    assert.ok(decodeErrors > 0, 'some corruptions reach the IPC reader and are reported as TypeDecodeError');
  });

  it('an Arrow value the IPC writer cannot write is a CodecError, and the value stays in memory', async (t) => {
    const table = tableFromArrays({ id: new Int32Array([1, 2]) });
    // A column whose type the IPC format has no id for.
    const data = table.batches[0].data.children[0] as unknown as { type: { typeId: number } };
    const bogus = Object.create(Object.getPrototypeOf(data.type), { typeId: { value: 999 } }) as object;
    Object.defineProperty(data, 'type', { value: bogus });
    await assert.rejects(encodeToBuffer(table), (err: unknown) => err instanceof CodecError && err.code === 'SPW_ERR_CODEC');
    const dir = await tempDir(t);
    const store = await SpillStore.open({ memoryLimit: '64 MiB', tiers: [new DiskTier({ directory: dir })] });
    t.after(() => store.close());
    store.on('error', () => undefined);
    store.set('bad', table);
    await store.evict(Infinity);
    assert.equal(await store.get('bad'), table, 'refused by the codec, kept in memory');
  });

  it('a table of a copy of apache-arrow Spillway does not know is a CodecError, never its schema without its data', async () => {
    // Arrow's classes answer instanceof for any object carrying its table mark: a writer of
    // one copy handed such a value wrote the schema and no rows.
    const real = tableFromArrays({ id: new Int32Array([1, 2]) });
    class Table {
      readonly schema = real.schema;
      readonly batches = real.batches;
    }
    const lookalike = Object.assign(new Table(), { [Symbol.for('apache-arrow/Table')]: true });
    assert.ok((lookalike as unknown) instanceof arrow.Table, "Arrow's own instanceof takes the look-alike");
    await assert.rejects(encodeToBuffer(lookalike), (err: unknown) => err instanceof CodecError && /registerArrow/.test(err.message));
  });

  it('importing spillway does not load apache-arrow; the first Arrow value does', async () => {
    const script = fileURLToPath(new URL(`./fixtures/arrow-lazy${ext}`, import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, [...nodeImports, script], { timeout: 60_000 });
    assert.deepEqual(JSON.parse(stdout), { afterImport: false, afterPlainValues: false, afterArrowValue: true });
  });
});
