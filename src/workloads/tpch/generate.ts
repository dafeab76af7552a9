/**
 * A seeded, partitioned generator of TPC-H-style `orders`, `lineitem` and `customer` rows,
 * as Apache Arrow record batches, with the TPC-H value distributions (spec 4.2.3) for the
 * columns queries 1 and 3 read. Orders and their line items are partitioned by ranges of
 * orders, as dbgen's chunks are; customers by ranges of customer keys.
 *
 * Units keep every sum exact in JavaScript numbers: money in cents, discount and tax in
 * hundredths, dates as days since 1970-01-01 (Int32). Q1 and Q3 (q1.ts, q3.ts) and the
 * reference for an independent engine (test/helpers/tpch-duckdb.ts) read them so.
 */
import * as arrow from 'apache-arrow';
import { registerArrow } from '../../codec/arrow.js';
import { nextState, partitionSeed } from '../common.js';

// The copy of Arrow this module builds with is the one its values are encoded with.
registerArrow(arrow);

const day = (iso: string): number => Date.UTC(Number(iso.slice(0, 4)), Number(iso.slice(5, 7)) - 1, Number(iso.slice(8, 10))) / 86_400_000;

/** TPC-H's STARTDATE, CURRENTDATE and ENDDATE (spec 4.2.2.12), in days. */
export const START_DATE = day('1992-01-01');
export const CURRENT_DATE = day('1995-06-17');
export const END_DATE = day('1998-12-31');

export const SEGMENTS = ['AUTOMOBILE', 'BUILDING', 'FURNITURE', 'HOUSEHOLD', 'MACHINERY'] as const;
export const RETURN_FLAGS = ['A', 'N', 'R'] as const;
export const LINE_STATUSES = ['F', 'O'] as const;

/** Rows per unit of scale factor (spec 4.2.5). */
const ORDERS_PER_SF = 1_500_000;
const CUSTOMERS_PER_SF = 150_000;
const PARTS_PER_SF = 200_000;
const CUSTOMER_SALT = 0x6b43a9b5;

/** Arrow bytes of one line item and of a quarter of an order (an order has 4 line items on average). */
export const BYTES_PER_LINEITEM = 4 * 5 + 3 + 4 + 4;

/** A generation: its scale factor (fractional for small runs), seed and partitioning. */
export interface TpchScale {
  readonly scaleFactor: number;
  readonly seed: number;
  /** Partitions of orders (and their line items). */
  readonly partitions: number;
}

export function orderCount(scaleFactor: number): number {
  return Math.max(8, Math.round(scaleFactor * ORDERS_PER_SF));
}

export function customerCount(scaleFactor: number): number {
  return Math.max(10, Math.round(scaleFactor * CUSTOMERS_PER_SF));
}

function partCount(scaleFactor: number): number {
  return Math.max(10, Math.round(scaleFactor * PARTS_PER_SF));
}

/** The scale factor whose orders and line items hold about `bytes` as Arrow columns. */
export function scaleForBytes(bytes: number): number {
  const perOrder = 4 * BYTES_PER_LINEITEM + 16;
  return bytes / perOrder / ORDERS_PER_SF;
}

/** Orders of partition `p`: [first, end) of the global order sequence. */
export function orderRange(total: number, partitions: number, p: number): [number, number] {
  return [Math.floor((p * total) / partitions), Math.floor(((p + 1) * total) / partitions)];
}

/** The sparse order keys of the spec (4.2.3): of every 32 keys, the first 8 are used. */
export function orderKeyOf(index: number): number {
  return Math.floor(index / 8) * 32 + (index % 8) + 1;
}

/** P_RETAILPRICE in cents (spec 4.2.3). */
export function retailPriceCents(partKey: number): number {
  return 90_000 + (Math.floor(partKey / 10) % 20_001) + 100 * (partKey % 1_000);
}

class Random {
  #state: number;
  constructor(seed: number) {
    this.#state = seed;
  }

  /** Uniform integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    this.#state = nextState(this.#state);
    return lo + Math.floor((this.#state / 4_294_967_296) * (hi - lo + 1));
  }
}

export interface OrdersPartition {
  orders: arrow.RecordBatch;
  lineitem: arrow.RecordBatch;
}

/**
 * Orders of partition `p` and their line items. Columns — orders: o_orderkey, o_custkey,
 * o_orderdate (days), o_shippriority; lineitem: l_orderkey, l_quantity, l_extendedprice
 * (cents), l_discount, l_tax (hundredths), l_returnflag, l_linestatus (dictionaries),
 * l_shipdate, l_receiptdate (days).
 */
export function generateOrders(scale: TpchScale, p: number): OrdersPartition {
  const { scaleFactor, seed, partitions } = scale;
  const [first, end] = orderRange(orderCount(scaleFactor), partitions, p);
  const customers = customerCount(scaleFactor);
  const parts = partCount(scaleFactor);
  const n = end - first;
  const rand = new Random(partitionSeed(seed, p));
  const o = { key: new Int32Array(n), cust: new Int32Array(n), date: new Int32Array(n) };
  const capacity = n * 7;
  const l = {
    key: new Int32Array(capacity),
    quantity: new Int32Array(capacity),
    price: new Int32Array(capacity),
    discount: new Int32Array(capacity),
    tax: new Int32Array(capacity),
    flag: new Uint8Array(capacity),
    status: new Uint8Array(capacity),
    ship: new Int32Array(capacity),
    receipt: new Int32Array(capacity),
  };
  let rows = 0;
  for (let i = 0; i < n; i++) {
    const key = orderKeyOf(first + i);
    let cust = rand.int(1, customers);
    while (cust % 3 === 0) cust = rand.int(1, customers); // a third of customers place no orders
    const orderDate = rand.int(START_DATE, END_DATE - 151);
    o.key[i] = key;
    o.cust[i] = cust;
    o.date[i] = orderDate;
    const lines = rand.int(1, 7);
    for (let line = 0; line < lines; line++, rows++) {
      const quantity = rand.int(1, 50);
      const ship = orderDate + rand.int(1, 121);
      const receipt = ship + rand.int(1, 30);
      l.key[rows] = key;
      l.quantity[rows] = quantity;
      l.price[rows] = quantity * retailPriceCents(rand.int(1, parts));
      l.discount[rows] = rand.int(0, 10);
      l.tax[rows] = rand.int(0, 8);
      const returned = rand.int(0, 1);
      l.flag[rows] = receipt <= CURRENT_DATE ? (returned === 1 ? 2 : 0) : 1; // R or A, else N
      l.status[rows] = ship > CURRENT_DATE ? 1 : 0; // O, else F
      l.ship[rows] = ship;
      l.receipt[rows] = receipt;
    }
  }
  const orders = batchOf({
    o_orderkey: int32(o.key),
    o_custkey: int32(o.cust),
    o_orderdate: int32(o.date),
    o_shippriority: int32(new Int32Array(n)),
  });
  const lineitem = batchOf({
    l_orderkey: int32(l.key.slice(0, rows)),
    l_quantity: int32(l.quantity.slice(0, rows)),
    l_extendedprice: int32(l.price.slice(0, rows)),
    l_discount: int32(l.discount.slice(0, rows)),
    l_tax: int32(l.tax.slice(0, rows)),
    l_returnflag: dictionary(l.flag.slice(0, rows), RETURN_FLAGS),
    l_linestatus: dictionary(l.status.slice(0, rows), LINE_STATUSES),
    l_shipdate: int32(l.ship.slice(0, rows)),
    l_receiptdate: int32(l.receipt.slice(0, rows)),
  });
  return { orders, lineitem };
}

/** Customers of partition `p` of `partitions`: c_custkey, c_mktsegment (a dictionary). */
export function generateCustomers(scaleFactor: number, seed: number, partitions: number, p: number): arrow.RecordBatch {
  const [first, end] = orderRange(customerCount(scaleFactor), partitions, p);
  const rand = new Random(partitionSeed(seed ^ CUSTOMER_SALT, p));
  const n = end - first;
  const keys = new Int32Array(n);
  const segments = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    keys[i] = first + i + 1;
    segments[i] = rand.int(0, SEGMENTS.length - 1);
  }
  return batchOf({ c_custkey: int32(keys), c_mktsegment: dictionary(segments, SEGMENTS) });
}

function int32(values: Int32Array): arrow.Vector {
  return arrow.makeVector(values);
}

function dictionary(indices: Uint8Array, names: readonly string[]): arrow.Vector {
  const type = new arrow.Dictionary(new arrow.Utf8(), new arrow.Uint8());
  return arrow.makeVector(arrow.makeData({ type, length: indices.length, data: indices, dictionary: arrow.vectorFromArray([...names], new arrow.Utf8()) }));
}

function batchOf(columns: Record<string, arrow.Vector>): arrow.RecordBatch {
  const table = new arrow.Table(columns);
  if (table.batches.length !== 1) throw new RangeError(`expected one batch, got ${table.batches.length}`);
  return table.batches[0];
}

/** A column's values as its typed array (one batch, no nulls: the generator's batches). */
export function columnValues<T extends Int32Array | Uint8Array>(batch: arrow.RecordBatch, name: string): T {
  const column = batch.getChild(name);
  if (column === null) throw new RangeError(`no column ${name}`);
  const data = column.data[0];
  return data.values.subarray(data.offset, data.offset + data.length) as T;
}

/** A dictionary column's indices and its dictionary's strings. */
export function dictionaryColumn(batch: arrow.RecordBatch, name: string): { indices: Uint8Array; names: string[] } {
  const column = batch.getChild(name);
  if (column === null) throw new RangeError(`no column ${name}`);
  const data = column.data[0];
  const dictionary = data.dictionary;
  if (dictionary === undefined) throw new RangeError(`column ${name} is not a dictionary`);
  return { indices: (data.values as Uint8Array).subarray(data.offset, data.offset + data.length), names: [...dictionary].map(String) };
}

// ---- task functions -----------------------------------------------------------------

/** Task: orders and line items of partition `p`. */
export function ordersPartition(scale: TpchScale, p: number): OrdersPartition {
  return generateOrders(scale, p);
}

/** Task: customers of partition `p`. */
export function customerPartition(scaleFactor: number, seed: number, partitions: number, p: number): arrow.RecordBatch {
  return generateCustomers(scaleFactor, seed, partitions, p);
}
