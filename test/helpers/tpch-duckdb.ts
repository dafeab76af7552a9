/**
 * TPC-H queries 1 and 3 run by DuckDB, an independent engine, over the generator's rows
 * written to Parquet: the reference the built-in workloads' results are checked against.
 * The generated Arrow columns go through DuckDB's appender into Parquet files with the
 * spec's types (DECIMAL(15,2), DATE, CHAR); the queries are the standard SQL.
 */
import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { DuckDBDataChunk, DuckDBInstance, INTEGER, UTINYINT, type DuckDBConnection } from '@duckdb/node-api';
import type { RecordBatch } from 'apache-arrow';
import { LINE_STATUSES, RETURN_FLAGS, SEGMENTS, type TpchScale, columnValues, dictionaryColumn, generateCustomers, generateOrders } from '../../src/workloads/tpch/generate.js';
import { decimal } from '../../src/workloads/tpch/decimal.js';
import type { Q1Row } from '../../src/workloads/tpch/q1.js';
import type { Q3Row } from '../../src/workloads/tpch/q3.js';
import { compareRows } from '../../src/workloads/tpch/index.js';
import type { Verification } from '../../src/workloads/common.js';

export const Q1_SQL = `
select l_returnflag, l_linestatus,
  sum(l_quantity) as sum_qty,
  sum(l_extendedprice) as sum_base_price,
  sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
  sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,
  avg(l_quantity) as avg_qty,
  avg(l_extendedprice) as avg_price,
  avg(l_discount) as avg_disc,
  count(*) as count_order
from lineitem
where l_shipdate <= date '1998-12-01' - interval '90' day
group by l_returnflag, l_linestatus
order by l_returnflag, l_linestatus`;

export const Q3_SQL = `
select l_orderkey,
  sum(l_extendedprice * (1 - l_discount)) as revenue,
  o_orderdate, o_shippriority
from customer, orders, lineitem
where c_mktsegment = 'BUILDING'
  and c_custkey = o_custkey
  and l_orderkey = o_orderkey
  and o_orderdate < date '1995-03-15'
  and l_shipdate > date '1995-03-15'
group by l_orderkey, o_orderdate, o_shippriority
order by revenue desc, o_orderdate
limit 10`;

/** Spec types of the Parquet columns, from the generator's units (cents, hundredths, days, dictionary indices). */
const TABLES = {
  lineitem: {
    raw: ['l_orderkey', 'l_quantity', 'l_extendedprice', 'l_discount', 'l_tax', 'l_returnflag', 'l_linestatus', 'l_shipdate', 'l_receiptdate'],
    typed: `l_orderkey::BIGINT as l_orderkey, l_quantity::DECIMAL(15,2) as l_quantity,
      (l_extendedprice * 0.01)::DECIMAL(15,2) as l_extendedprice, (l_discount * 0.01)::DECIMAL(15,2) as l_discount,
      (l_tax * 0.01)::DECIMAL(15,2) as l_tax, ${listOf(RETURN_FLAGS)}[l_returnflag + 1]::CHAR(1) as l_returnflag,
      ${listOf(LINE_STATUSES)}[l_linestatus + 1]::CHAR(1) as l_linestatus, date '1970-01-01' + l_shipdate as l_shipdate,
      date '1970-01-01' + l_receiptdate as l_receiptdate`,
  },
  orders: {
    raw: ['o_orderkey', 'o_custkey', 'o_orderdate', 'o_shippriority'],
    typed: "o_orderkey::BIGINT as o_orderkey, o_custkey::BIGINT as o_custkey, date '1970-01-01' + o_orderdate as o_orderdate, o_shippriority",
  },
  customer: {
    raw: ['c_custkey', 'c_mktsegment'],
    typed: `c_custkey::BIGINT as c_custkey, ${listOf(SEGMENTS)}[c_mktsegment + 1]::CHAR(10) as c_mktsegment`,
  },
} as const;

type TableName = keyof typeof TABLES;

function listOf(names: readonly string[]): string {
  return `[${names.map((n) => `'${n}'`).join(', ')}]`;
}

/** A column of a generated batch as its typed array: values, or a dictionary's indices. */
function rawColumn(batch: RecordBatch, name: string): Int32Array | Uint8Array {
  return batch.getChild(name)?.data[0].dictionary === undefined ? columnValues<Int32Array>(batch, name) : dictionaryColumn(batch, name).indices;
}

/** DuckDB over Parquet files of one generation, in `directory`. */
export class TpchDuckDB {
  private constructor(
    private readonly connection: DuckDBConnection,
    private readonly close_: () => void,
    /** The Parquet file of `table`'s partition `p`. */
    readonly parquetFile: (table: TableName, p: number) => string,
  ) {}

  /**
   * Generates the rows of `scale` (every partition, and customers in `scale.partitions`
   * parts) and writes each partition to a Parquet file in `directory`: the Arrow batches'
   * columns go into DuckDB through its appender in chunks, and DuckDB writes them with the
   * spec's types.
   */
  static async create(scale: TpchScale, directory: string): Promise<TpchDuckDB> {
    const instance = await DuckDBInstance.create(':memory:', { threads: '2' });
    const connection = await instance.connect();
    const parquetFile = (table: TableName, p: number): string => path.join(directory, table, `part-${String(p).padStart(5, '0')}.parquet`);
    const db = new TpchDuckDB(
      connection,
      () => {
        connection.closeSync();
        instance.closeSync();
      },
      parquetFile,
    );
    try {
      for (const table of Object.keys(TABLES) as TableName[]) await fsp.mkdir(path.join(directory, table), { recursive: true });
      for (let p = 0; p < scale.partitions; p++) {
        const part = generateOrders(scale, p);
        await db.writePartition('lineitem', part.lineitem, parquetFile('lineitem', p));
        await db.writePartition('orders', part.orders, parquetFile('orders', p));
        await db.writePartition('customer', generateCustomers(scale.scaleFactor, scale.seed, scale.partitions, p), parquetFile('customer', p));
      }
      for (const table of Object.keys(TABLES) as TableName[]) {
        const files = path.join(directory, table, '*.parquet').replaceAll("'", "''");
        await connection.run(`create view ${table} as select * from read_parquet('${files}')`);
      }
    } catch (error) {
      db.close();
      throw error;
    }
    return db;
  }

  /** Appends `batch` to a scratch table through DuckDB's appender, writes it typed to `file`, empties the scratch table. */
  private async writePartition(table: TableName, batch: RecordBatch, file: string): Promise<void> {
    const { raw, typed } = TABLES[table];
    const columns = raw.map((name) => rawColumn(batch, name));
    const scratch = `raw_${table}`;
    const types = columns.map((c) => (c instanceof Uint8Array ? UTINYINT : INTEGER));
    await this.connection.run(`create table if not exists ${scratch} (${raw.map((name, i) => `${name} ${types[i].toString()}`).join(', ')})`);
    const appender = await this.connection.createAppender(scratch);
    const chunkRows = 2048; // DuckDB's vector size: the most rows a data chunk holds
    const chunk = DuckDBDataChunk.create(types);
    for (let start = 0; start < batch.numRows; start += chunkRows) {
      const rows = Math.min(chunkRows, batch.numRows - start);
      chunk.reset();
      chunk.rowCount = rows;
      for (let c = 0; c < columns.length; c++) {
        const vector = chunk.getColumnVector(c);
        const values = columns[c];
        for (let r = 0; r < rows; r++) vector.setItem(r, values[start + r]);
        vector.flush();
      }
      appender.appendDataChunk(chunk);
    }
    appender.closeSync();
    await this.connection.run(`copy (select ${typed} from ${scratch}) to '${file.replaceAll("'", "''")}' (format parquet)`);
    await this.connection.run(`delete from ${scratch}`);
  }

  /** Rows of any SQL over the Parquet views, as JSON-friendly objects. */
  async query(sql: string): Promise<Record<string, unknown>[]> {
    return (await this.run(sql)).rows;
  }

  /** Q1's rows as DuckDB gives them (decimals rounded to two places), and its time. */
  async q1(): Promise<{ rows: Q1Row[]; seconds: number }> {
    const { rows, seconds } = await this.run(Q1_SQL);
    return {
      seconds,
      rows: rows.map((r) => ({
        l_returnflag: String(r.l_returnflag),
        l_linestatus: String(r.l_linestatus),
        sum_qty: cents(r.sum_qty),
        sum_base_price: cents(r.sum_base_price),
        sum_disc_price: cents(r.sum_disc_price),
        sum_charge: cents(r.sum_charge),
        avg_qty: cents(r.avg_qty),
        avg_price: cents(r.avg_price),
        avg_disc: cents(r.avg_disc),
        count_order: Number(r.count_order),
      })),
    };
  }

  /** Q3's rows as DuckDB gives them, and its time. */
  async q3(): Promise<{ rows: Q3Row[]; seconds: number }> {
    const { rows, seconds } = await this.run(Q3_SQL);
    return {
      seconds,
      rows: rows.map((r) => ({ l_orderkey: Number(r.l_orderkey), revenue: cents(r.revenue), o_orderdate: String(r.o_orderdate), o_shippriority: Number(r.o_shippriority) })),
    };
  }

  /**
   * Q3's answer `got` checked against DuckDB's `expected`: row for row, except that where
   * two orders tie (the same revenue, date and priority, which the query's order does not
   * part) `got` may hold another of the tied orders: DuckDB is asked that order's Q3 row,
   * which must be the same. Counts the rows so accepted.
   */
  async checkQ3(got: readonly Q3Row[], expected: readonly Q3Row[]): Promise<Verification & { ties: number }> {
    const exact = compareRows(got, expected);
    if (exact.verified || got.length !== expected.length) return { ...exact, ties: 0 };
    const problems: string[] = [];
    let ties = 0;
    if (new Set(got.map((r) => r.l_orderkey)).size !== got.length) problems.push('an order appears twice');
    for (let i = 0; i < got.length; i++) {
      const [mine, theirs] = [got[i], expected[i]];
      const sameValues = mine.revenue === theirs.revenue && mine.o_orderdate === theirs.o_orderdate && mine.o_shippriority === theirs.o_shippriority;
      if (mine.l_orderkey === theirs.l_orderkey && sameValues) continue;
      if (mine.l_orderkey !== theirs.l_orderkey && sameValues) {
        const own = await this.run(Q3_SQL.replace("and l_shipdate > date '1995-03-15'", `and l_shipdate > date '1995-03-15' and l_orderkey = ${mine.l_orderkey}`));
        const row = own.rows[0];
        if (own.rows.length === 1 && cents(row.revenue) === mine.revenue && String(row.o_orderdate) === mine.o_orderdate && Number(row.o_shippriority) === mine.o_shippriority) {
          ties++;
          continue;
        }
      }
      problems.push(`row ${i + 1}: ${JSON.stringify(mine)}, expected ${JSON.stringify(theirs)}`);
    }
    return { verified: problems.length === 0, problems, ties };
  }

  private async run(sql: string): Promise<{ rows: Record<string, unknown>[]; seconds: number }> {
    const started = performance.now();
    const reader = await this.connection.runAndReadAll(sql);
    const seconds = (performance.now() - started) / 1000;
    return { rows: reader.getRowObjectsJson() as Record<string, unknown>[], seconds };
  }

  close(): void {
    this.close_();
  }
}

/** A DuckDB decimal or double (as JSON gives them: strings or numbers) rounded half up to two places. */
function cents(value: unknown): string {
  const text = String(value);
  const match = /^(-?)(\d+)(?:\.(\d+))?$/.exec(text);
  if (match === null) return Number(text).toFixed(2);
  const [, sign, whole, fraction = ''] = match;
  return (sign === '-' ? '-' : '') + decimal(BigInt(whole + fraction), fraction.length);
}

export { LINE_STATUSES, RETURN_FLAGS, SEGMENTS };
