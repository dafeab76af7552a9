/**
 * An Apache Arrow table between two stores (issue 31): served to the peer from the holder's
 * disk and received to the peer's disk as encoded bytes, decoded by neither; read back as
 * the same table.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import * as arrow from 'apache-arrow';
import { registerArrow } from '../../src/index.js';
import { DataClient, DataServer } from '../../src/transfer/index.js';
import { Fixture } from './helpers.js';

// tsx gives this file its own instance of apache-arrow, not the one Node resolves for Spillway.
registerArrow(arrow);

const KiB = 1024;

function table(rows: number): arrow.Table {
  return new arrow.Table({
    id: arrow.makeVector(BigInt64Array.from({ length: rows }, (_, i) => BigInt(i) * 4_000_000_000n)),
    name: arrow.vectorFromArray(
      Array.from({ length: rows }, (_, i) => (i % 11 === 0 ? null : ['AIR', 'MAIL', 'SHIP'][i % 3])),
      new arrow.Dictionary(new arrow.Utf8(), new arrow.Int32()),
    ),
    tags: arrow.vectorFromArray(
      Array.from({ length: rows }, (_, i) => (i % 7 === 0 ? null : [i, i + 1])),
      new arrow.List(new arrow.Field('item', new arrow.Int32(), true)),
    ),
  });
}

/** Rows as JSON text, 64-bit values kept exact. */
function rowsOf(t: arrow.Table): string {
  return JSON.stringify(t.toArray(), (_key, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
}

describe('Arrow values between stores', () => {
  const fx = new Fixture();
  afterEach(() => fx.cleanup());

  it('are served from disk and received to disk without being decoded, and read back as the same table', async () => {
    const source = await fx.store();
    const target = await fx.store();
    const server = await DataServer.listen(source);
    fx.defer(() => server.close());
    const value = table(20_000);
    source.set('t', value);
    source.set('plain', { a: 1 });
    await source.evict(Infinity);
    assert.equal(source.where('t'), 'disk');
    const sourceBefore = source.stats().counters;

    const result = await new DataClient({ diskThresholdBytes: 64 * KiB }).fetch(server.address, ['t', 'plain'], target);
    assert.deepEqual(result.fetched.sort(), ['plain', 't']);
    assert.equal(result.toDisk, 1, 'the table went straight to disk');

    const sourceAfter = source.stats().counters;
    assert.equal(sourceAfter.decodeSeconds, sourceBefore.decodeSeconds, 'the holder decoded nothing');
    assert.equal(sourceAfter.diskReads, sourceBefore.diskReads, 'the holder loaded nothing into memory');
    assert.ok(server.stats().servedFromDiskBytes > 64 * KiB, 'served from the holder’s disk');
    assert.equal(target.where('t'), 'disk');
    assert.equal(target.stats().counters.decodeSeconds, 0, 'the receiver decoded nothing');

    const back = (await target.get('t')) as arrow.Table;
    assert.ok(back instanceof arrow.Table);
    assert.equal(String(back.schema.fields.map((f) => f.type)), String(value.schema.fields.map((f) => f.type)));
    assert.equal(back.numRows, value.numRows);
    assert.equal(rowsOf(back), rowsOf(value), 'the same rows, nulls, 64-bit values and lists');
    assert.deepEqual(await target.get('plain'), { a: 1 });
  });
});
