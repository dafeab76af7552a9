/**
 * TPC-H query 3, the shipping priority query: the ten unshipped orders of the BUILDING
 * segment with the largest revenue on 1995-03-15. Customers of the segment become a bitmap
 * every orders partition filters with; the filtered orders and line items are both
 * shuffled by a hash of the order key (the p2p shuffle), joined where they meet, summed per
 * order, and each output's ten best merged into the answer. The generator happens to
 * partition orders and line items alike (as dbgen does); the join does not count on it, as
 * an engine that does not know how its inputs were partitioned would not.
 *
 * The task functions are exported from this module, which every worker imports.
 */
import * as arrow from 'apache-arrow';
import type { Graph } from '../../cluster/protocol.js';
import { builtins, ref } from '../../cluster/protocol.js';
import { shuffle } from '../../shuffle/protocol.js';
import { mix32, yieldToLoop } from '../common.js';
import { decimal } from './decimal.js';
import { SEGMENTS, type TpchScale, columnValues, customerCount, dictionaryColumn, generateCustomers, generateOrders } from './generate.js';
import { GENERATE } from './q1.js';

const MODULE = import.meta.url;
const KEY_SALT = 0x3c6ef372;

export const Q3_SEGMENT = 'BUILDING';
/** o_orderdate < date '1995-03-15' and l_shipdate > date '1995-03-15', in days. */
export const Q3_DATE = Date.UTC(1995, 2, 15) / 86_400_000;

/** A result row as the standard SQL names its columns; revenue an exact decimal string, the date ISO. */
export interface Q3Row {
  l_orderkey: number;
  revenue: string;
  o_orderdate: string;
  o_shippriority: number;
}

/** A candidate row: revenue in 1e-4 units (cents × (100 − discount)), exact. */
export interface Q3Candidate {
  orderkey: number;
  revenue: number;
  orderdate: number;
  shippriority: number;
}

// ---- task functions -----------------------------------------------------------------

/** Customers of `segment` across the customer partitions, as a bitmap by customer key. */
export function q3SegmentBitmap(scaleFactor: number, segment: string, ...customers: arrow.RecordBatch[]): Uint8Array {
  const bitmap = new Uint8Array(customerCount(scaleFactor) + 1);
  for (const batch of customers) {
    const keys = columnValues<Int32Array>(batch, 'c_custkey');
    const segments = dictionaryColumn(batch, 'c_mktsegment');
    const wanted = segments.names.indexOf(segment);
    for (let r = 0; r < keys.length; r++) if (segments.indices[r] === wanted) bitmap[keys[r]] = 1;
  }
  return bitmap;
}

/** Orders of the segment's customers placed before `date`: o_orderkey, o_orderdate, o_shippriority. */
export function q3Orders(orders: arrow.RecordBatch, customers: Uint8Array, date: number): arrow.RecordBatch {
  const key = columnValues<Int32Array>(orders, 'o_orderkey');
  const cust = columnValues<Int32Array>(orders, 'o_custkey');
  const orderDate = columnValues<Int32Array>(orders, 'o_orderdate');
  const priority = columnValues<Int32Array>(orders, 'o_shippriority');
  const keep = (r: number): boolean => orderDate[r] < date && customers[cust[r]] === 1;
  return select({ o_orderkey: key, o_orderdate: orderDate, o_shippriority: priority }, key.length, keep);
}

/** Line items shipped after `date`: l_orderkey and their revenue (l_revenue, 1e-4 units). */
export function q3Lineitem(lineitem: arrow.RecordBatch, date: number): arrow.RecordBatch {
  const key = columnValues<Int32Array>(lineitem, 'l_orderkey');
  const price = columnValues<Int32Array>(lineitem, 'l_extendedprice');
  const discount = columnValues<Int32Array>(lineitem, 'l_discount');
  const ship = columnValues<Int32Array>(lineitem, 'l_shipdate');
  const revenue = new Int32Array(key.length);
  for (let r = 0; r < key.length; r++) revenue[r] = price[r] * (100 - discount[r]);
  return select({ l_orderkey: key, l_revenue: revenue }, key.length, (r) => ship[r] > date);
}

/** Shuffle split: rows by a hash of the order key (the batch's first column) into `parts` batches. */
export function q3Split(batch: arrow.RecordBatch, parts: number): arrow.RecordBatch[] {
  const names = batch.schema.fields.map((f) => f.name);
  const columns = names.map((name) => columnValues<Int32Array>(batch, name));
  const key = columns[0];
  const bucket = new Uint32Array(key.length);
  const sizes = new Uint32Array(parts);
  for (let r = 0; r < key.length; r++) sizes[(bucket[r] = mix32(key[r], KEY_SALT) % parts)]++;
  const pieces = Array.from(sizes, (n) => columns.map(() => new Int32Array(n)));
  const fill = new Uint32Array(parts);
  for (let r = 0; r < key.length; r++) {
    const b = bucket[r];
    const at = fill[b]++;
    for (let c = 0; c < columns.length; c++) pieces[b][c][at] = columns[c][r];
  }
  return pieces.map((piece) => batchOf(Object.fromEntries(names.map((name, c) => [name, piece[c]]))));
}

/** Shuffle combine: the pieces one after the other. */
export function q3Concat(pieces: arrow.RecordBatch[]): arrow.RecordBatch {
  const names = pieces[0].schema.fields.map((f) => f.name);
  const total = pieces.reduce((n, p) => n + p.numRows, 0);
  const out = names.map(() => new Int32Array(total));
  let at = 0;
  for (const piece of pieces) {
    names.forEach((name, c) => out[c].set(columnValues<Int32Array>(piece, name), at));
    at += piece.numRows;
  }
  return batchOf(Object.fromEntries(names.map((name, c) => [name, out[c]])));
}

/** Joins one output's orders and line items, sums revenue per order, keeps the ten best. */
export function q3Join(orders: arrow.RecordBatch, lineitem: arrow.RecordBatch): Q3Candidate[] {
  const okey = columnValues<Int32Array>(orders, 'o_orderkey');
  const odate = columnValues<Int32Array>(orders, 'o_orderdate');
  const opriority = columnValues<Int32Array>(orders, 'o_shippriority');
  const index = new Map<number, number>();
  for (let r = 0; r < okey.length; r++) index.set(okey[r], r);
  const lkey = columnValues<Int32Array>(lineitem, 'l_orderkey');
  const lrevenue = columnValues<Int32Array>(lineitem, 'l_revenue');
  const revenue = new Float64Array(okey.length);
  const matched = new Uint8Array(okey.length);
  for (let r = 0; r < lkey.length; r++) {
    const o = index.get(lkey[r]);
    if (o === undefined) continue;
    revenue[o] += lrevenue[r];
    matched[o] = 1;
  }
  const candidates: Q3Candidate[] = [];
  for (let o = 0; o < okey.length; o++) {
    if (matched[o] === 1) candidates.push({ orderkey: okey[o], revenue: revenue[o], orderdate: odate[o], shippriority: opriority[o] });
  }
  return topTen(candidates);
}

/** The ten best of every output's ten best. */
export function q3Top(...lists: Q3Candidate[][]): Q3Candidate[] {
  return topTen(lists.flat());
}

// ---- graph, result and reference ----------------------------------------------------

/** By revenue, descending, then order date (the query's order), then order key (ties, for a stable answer). */
function topTen(candidates: Q3Candidate[]): Q3Candidate[] {
  return candidates.sort((a, b) => b.revenue - a.revenue || a.orderdate - b.orderdate || a.orderkey - b.orderkey).slice(0, 10);
}

/** Q3's graph over `scale.partitions` partitions (and as many shuffle outputs); `wanted` is the answer's key. */
export function q3Graph(scale: TpchScale): { graph: Graph; wanted: string } {
  const P = scale.partitions;
  const fn = (name: string): { module: string; name: string } => ({ module: MODULE, name });
  const graph: Graph = {};
  const customers: string[] = [];
  for (let p = 0; p < P; p++) {
    graph[`customer-${p}`] = { fn: { module: GENERATE, name: 'customerPartition' }, args: [scale.scaleFactor, scale.seed, P, p] };
    customers.push(`customer-${p}`);
  }
  graph['q3-segment'] = { fn: fn('q3SegmentBitmap'), args: [scale.scaleFactor, Q3_SEGMENT, ...customers.map((k) => ref(k))] };
  const orders: string[] = [];
  const lineitems: string[] = [];
  for (let p = 0; p < P; p++) {
    graph[`tpch-${p}`] = { fn: { module: GENERATE, name: 'ordersPartition' }, args: [scale, p] };
    graph[`orders-${p}`] = { fn: builtins.getitem, args: [ref(`tpch-${p}`), 'orders'] };
    graph[`lineitem-${p}`] = { fn: builtins.getitem, args: [ref(`tpch-${p}`), 'lineitem'] };
    graph[`q3-orders-${p}`] = { fn: fn('q3Orders'), args: [ref(`orders-${p}`), ref('q3-segment'), Q3_DATE] };
    graph[`q3-lineitem-${p}`] = { fn: fn('q3Lineitem'), args: [ref(`lineitem-${p}`), Q3_DATE] };
    orders.push(`q3-orders-${p}`);
    lineitems.push(`q3-lineitem-${p}`);
  }
  const byKey = (id: string, inputs: string[]): ReturnType<typeof shuffle> =>
    shuffle({ id, inputs, partitions: P, split: fn('q3Split'), combine: fn('q3Concat'), outputKey: (j) => `${id}-${j}` });
  const ordersByKey = byKey('q3-orders-by-key', orders);
  const lineitemByKey = byKey('q3-lineitem-by-key', lineitems);
  Object.assign(graph, ordersByKey.graph, lineitemByKey.graph);
  const tops: string[] = [];
  for (let j = 0; j < P; j++) {
    graph[`q3-join-${j}`] = { fn: fn('q3Join'), args: [ref(ordersByKey.outputs[j]), ref(lineitemByKey.outputs[j])] };
    tops.push(`q3-join-${j}`);
  }
  graph['q3-top'] = { fn: fn('q3Top'), args: tops.map((k) => ref(k)) };
  return { graph, wanted: 'q3-top' };
}

export function q3Rows(candidates: readonly Q3Candidate[]): Q3Row[] {
  return candidates.map((c) => ({
    l_orderkey: c.orderkey,
    revenue: decimal(BigInt(c.revenue), 4),
    o_orderdate: new Date(c.orderdate * 86_400_000).toISOString().slice(0, 10),
    o_shippriority: c.shippriority,
  }));
}

/** Q3 computed in this process, row by row over freshly generated partitions: the workload's own check. */
export async function q3Reference(scale: TpchScale): Promise<Q3Row[]> {
  const segment = SEGMENTS.indexOf(Q3_SEGMENT);
  const inSegment = new Uint8Array(customerCount(scale.scaleFactor) + 1);
  for (let p = 0; p < scale.partitions; p++) {
    const batch = generateCustomers(scale.scaleFactor, scale.seed, scale.partitions, p);
    const keys = columnValues<Int32Array>(batch, 'c_custkey');
    const segments = dictionaryColumn(batch, 'c_mktsegment').indices;
    for (let r = 0; r < keys.length; r++) if (segments[r] === segment) inSegment[keys[r]] = 1;
  }
  const candidates: Q3Candidate[] = [];
  for (let p = 0; p < scale.partitions; p++) {
    const { orders, lineitem } = generateOrders(scale, p);
    const okey = columnValues<Int32Array>(orders, 'o_orderkey');
    const cust = columnValues<Int32Array>(orders, 'o_custkey');
    const odate = columnValues<Int32Array>(orders, 'o_orderdate');
    const wanted = new Map<number, Q3Candidate>();
    for (let r = 0; r < okey.length; r++) {
      if (odate[r] < Q3_DATE && inSegment[cust[r]] === 1) wanted.set(okey[r], { orderkey: okey[r], revenue: 0, orderdate: odate[r], shippriority: 0 });
    }
    const lkey = columnValues<Int32Array>(lineitem, 'l_orderkey');
    const price = columnValues<Int32Array>(lineitem, 'l_extendedprice');
    const discount = columnValues<Int32Array>(lineitem, 'l_discount');
    const ship = columnValues<Int32Array>(lineitem, 'l_shipdate');
    const hit = new Set<number>();
    for (let r = 0; r < lkey.length; r++) {
      const order = wanted.get(lkey[r]);
      if (order === undefined || ship[r] <= Q3_DATE) continue;
      order.revenue += price[r] * (100 - discount[r]);
      hit.add(lkey[r]);
    }
    for (const key of hit) candidates.push(wanted.get(key) as Q3Candidate);
    const best = topTen(candidates);
    candidates.length = 0;
    candidates.push(...best);
    await yieldToLoop();
  }
  return q3Rows(candidates);
}

function select(columns: Record<string, Int32Array>, length: number, keep: (row: number) => boolean): arrow.RecordBatch {
  const rows: number[] = [];
  for (let r = 0; r < length; r++) if (keep(r)) rows.push(r);
  const out: Record<string, Int32Array> = {};
  for (const [name, values] of Object.entries(columns)) {
    const selected = new Int32Array(rows.length);
    for (let i = 0; i < rows.length; i++) selected[i] = values[rows[i]];
    out[name] = selected;
  }
  return batchOf(out);
}

/** A batch of Int32 columns, empty ones included (a Table of no rows would hold no batch). */
function batchOf(columns: Record<string, Int32Array>): arrow.RecordBatch {
  return new arrow.RecordBatch(Object.fromEntries(Object.entries(columns).map(([name, values]) => [name, arrow.makeData({ type: new arrow.Int32(), data: values })])));
}
