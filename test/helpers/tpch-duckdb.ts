/**
 * TPC-H queries 1 and 3 run by DuckDB, an independent engine, over the generator's rows
 * written to Parquet: the reference the built-in workloads' results are checked against.
 * The rows go through CSV (written here, typed by DuckDB's reader) into Parquet files with
 * the spec's types (DECIMAL(15,2), DATE, CHAR); the queries are the standard SQL.
 */
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import path from 'node:path';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { LINE_STATUSES, RETURN_FLAGS, SEGMENTS, type TpchScale, columnValues, dictionaryColumn, generateCustomers, generateOrders } from '../../src/workloads/tpch/generate.js';
import { decimal } from '../../src/workloads/tpch/decimal.js';
import type { Q1Row } from '../../src/workloads/tpch/q1.js';
import type { Q3Row } from '../../src/workloads/tpch/q3.js';

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

const isoDate = (days: number): string => new Date(days * 86_400_000).toISOString().slice(0, 10);
const money = (cents: number): string => decimal(BigInt(cents), 2);
const hundredths = (n: number): string => `0.${String(n).padStart(2, '0')}`;

/** DuckDB over Parquet files of one generation, in `directory`. */
export class TpchDuckDB {
  private constructor(
    private readonly connection: DuckDBConnection,
    private readonly close_: () => void,
  ) {}

  /** Generates the rows of `scale` (every partition, and customers in `scale.partitions` parts) and writes them to Parquet in `directory`. */
  static async create(scale: TpchScale, directory: string): Promise<TpchDuckDB> {
    const instance = await DuckDBInstance.create(':memory:', { threads: '2' });
    const connection = await instance.connect();
    const db = new TpchDuckDB(connection, () => {
      connection.closeSync();
      instance.closeSync();
    });
    const file = (name: string): string => path.join(directory, name);
    const lineitem = createWriteStream(file('lineitem.csv'));
    const orders = createWriteStream(file('orders.csv'));
    const customer = createWriteStream(file('customer.csv'));
    for (let p = 0; p < scale.partitions; p++) {
      const part = generateOrders(scale, p);
      const o = ['o_orderkey', 'o_custkey', 'o_orderdate', 'o_shippriority'].map((c) => columnValues<Int32Array>(part.orders, c));
      const lines: string[] = [];
      for (let r = 0; r < o[0].length; r++) lines.push(`${o[0][r]},${o[1][r]},${isoDate(o[2][r])},${o[3][r]}\n`);
      if (!orders.write(lines.join(''))) await once(orders, 'drain');
      const l = ['l_orderkey', 'l_quantity', 'l_extendedprice', 'l_discount', 'l_tax', 'l_shipdate', 'l_receiptdate'].map((c) => columnValues<Int32Array>(part.lineitem, c));
      const flag = dictionaryColumn(part.lineitem, 'l_returnflag');
      const status = dictionaryColumn(part.lineitem, 'l_linestatus');
      lines.length = 0;
      for (let r = 0; r < l[0].length; r++) {
        lines.push(
          `${l[0][r]},${l[1][r]},${money(l[2][r])},${hundredths(l[3][r])},${hundredths(l[4][r])},${flag.names[flag.indices[r]]},${status.names[status.indices[r]]},${isoDate(l[5][r])},${isoDate(l[6][r])}\n`,
        );
      }
      if (!lineitem.write(lines.join(''))) await once(lineitem, 'drain');
      const c = generateCustomers(scale.scaleFactor, scale.seed, scale.partitions, p);
      const keys = columnValues<Int32Array>(c, 'c_custkey');
      const segment = dictionaryColumn(c, 'c_mktsegment');
      lines.length = 0;
      for (let r = 0; r < keys.length; r++) lines.push(`${keys[r]},${segment.names[segment.indices[r]]}\n`);
      if (!customer.write(lines.join(''))) await once(customer, 'drain');
    }
    await Promise.all([lineitem, orders, customer].map(async (s) => (s.end(), await once(s, 'finish'))));
    const tables: Record<string, string> = {
      lineitem:
        "{'l_orderkey': 'BIGINT', 'l_quantity': 'DECIMAL(15,2)', 'l_extendedprice': 'DECIMAL(15,2)', 'l_discount': 'DECIMAL(15,2)', 'l_tax': 'DECIMAL(15,2)', 'l_returnflag': 'CHAR(1)', 'l_linestatus': 'CHAR(1)', 'l_shipdate': 'DATE', 'l_receiptdate': 'DATE'}",
      orders: "{'o_orderkey': 'BIGINT', 'o_custkey': 'BIGINT', 'o_orderdate': 'DATE', 'o_shippriority': 'INTEGER'}",
      customer: "{'c_custkey': 'BIGINT', 'c_mktsegment': 'CHAR(10)'}",
    };
    for (const [name, columns] of Object.entries(tables)) {
      const csv = file(`${name}.csv`).replaceAll("'", "''");
      const parquet = file(`${name}.parquet`).replaceAll("'", "''");
      await connection.run(`copy (select * from read_csv('${csv}', header = false, columns = ${columns})) to '${parquet}' (format parquet)`);
      await connection.run(`create view ${name} as select * from read_parquet('${parquet}')`);
    }
    return db;
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
