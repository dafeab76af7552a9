/**
 * TPC-H query 1, the pricing summary report: a group-by aggregation of `lineitem` by
 * return flag and line status over the rows shipped by 1998-09-02 (90 days before
 * 1998-12-01). Each partition is generated and aggregated where it lives; the partial sums
 * are merged by a tree of tasks; the client finishes the averages.
 *
 * Sums are exact: cents and hundredths are integers, and the products that need more than
 * 53 bits (price × (1 − discount) × (1 + tax)) are carried as bigints.
 *
 * The task functions are exported from this module, which every worker imports.
 */
import type * as arrow from 'apache-arrow';
import type { Graph } from '../../cluster/protocol.js';
import { builtins, ref } from '../../cluster/protocol.js';
import { treeReduce, yieldToLoop } from '../common.js';
import { LINE_STATUSES, RETURN_FLAGS, type TpchScale, columnValues, dictionaryColumn, generateOrders } from './generate.js';
import { type Decimal, decimal, ratio } from './decimal.js';

const MODULE = import.meta.url;
/** The generator's tasks (under tsx in development this file is .ts, and so is that one). */
export const GENERATE = new URL(MODULE.endsWith('.ts') ? './generate.ts' : './generate.js', MODULE).href;

/** l_shipdate <= date '1998-12-01' - interval '90' day, in days since 1970-01-01. */
export const Q1_SHIP_CUTOFF = Date.UTC(1998, 11, 1) / 86_400_000 - 90;

/** Exact partial sums of one group. `discPrice` in 1e-4 units, `charge` in 1e-6; the rest in cents, hundredths or units. */
export interface Q1Group {
  flag: string;
  status: string;
  count: number;
  quantity: number;
  base: number;
  discount: number;
  discPrice: bigint;
  charge: bigint;
}

/** A result row, as the standard SQL names its columns; decimals as exact strings (two places). */
export interface Q1Row {
  l_returnflag: string;
  l_linestatus: string;
  sum_qty: string;
  sum_base_price: string;
  sum_disc_price: string;
  sum_charge: string;
  avg_qty: string;
  avg_price: string;
  avg_disc: string;
  count_order: number;
}

/** Rows between flushes of the per-row products into bigints: 2^16 products of < 2^37 stay exact. */
const FLUSH_ROWS = 65_536;

// ---- task functions -----------------------------------------------------------------

/** Aggregates one lineitem batch. */
export function q1Partial(lineitem: arrow.RecordBatch, cutoff: number): Q1Group[] {
  const quantity = columnValues<Int32Array>(lineitem, 'l_quantity');
  const price = columnValues<Int32Array>(lineitem, 'l_extendedprice');
  const discount = columnValues<Int32Array>(lineitem, 'l_discount');
  const tax = columnValues<Int32Array>(lineitem, 'l_tax');
  const ship = columnValues<Int32Array>(lineitem, 'l_shipdate');
  const flags = dictionaryColumn(lineitem, 'l_returnflag');
  const statuses = dictionaryColumn(lineitem, 'l_linestatus');
  const slots = flags.names.length * statuses.names.length;
  const count = new Float64Array(slots);
  const qty = new Float64Array(slots);
  const base = new Float64Array(slots);
  const disc = new Float64Array(slots);
  const discPrice = new Float64Array(slots);
  const charge = new Float64Array(slots);
  const discPriceBig = new Array<bigint>(slots).fill(0n);
  const chargeBig = new Array<bigint>(slots).fill(0n);
  const flush = (): void => {
    for (let g = 0; g < slots; g++) {
      discPriceBig[g] += BigInt(discPrice[g]);
      chargeBig[g] += BigInt(charge[g]);
      discPrice[g] = 0;
      charge[g] = 0;
    }
  };
  for (let r = 0; r < ship.length; r++) {
    if (ship[r] > cutoff) continue;
    const g = flags.indices[r] * statuses.names.length + statuses.indices[r];
    const dp = price[r] * (100 - discount[r]);
    count[g]++;
    qty[g] += quantity[r];
    base[g] += price[r];
    disc[g] += discount[r];
    discPrice[g] += dp;
    charge[g] += dp * (100 + tax[r]);
    if ((r & (FLUSH_ROWS - 1)) === FLUSH_ROWS - 1) flush();
  }
  flush();
  const groups: Q1Group[] = [];
  for (let g = 0; g < slots; g++) {
    if (count[g] === 0) continue;
    const flag = flags.names[Math.floor(g / statuses.names.length)];
    const status = statuses.names[g % statuses.names.length];
    groups.push({ flag, status, count: count[g], quantity: qty[g], base: base[g], discount: disc[g], discPrice: discPriceBig[g], charge: chargeBig[g] });
  }
  return groups;
}

/** Merges two lists of partial groups. */
export function q1Merge(a: Q1Group[], b: Q1Group[]): Q1Group[] {
  const merged = new Map<string, Q1Group>();
  for (const group of [...a, ...b]) {
    const key = `${group.flag}|${group.status}`;
    const seen = merged.get(key);
    if (seen === undefined) merged.set(key, { ...group });
    else {
      seen.count += group.count;
      seen.quantity += group.quantity;
      seen.base += group.base;
      seen.discount += group.discount;
      seen.discPrice += group.discPrice;
      seen.charge += group.charge;
    }
  }
  return [...merged.values()];
}

// ---- graph, result and reference ----------------------------------------------------

/** Q1's graph over `scale.partitions` partitions; `wanted` is the merged groups' key. */
export function q1Graph(scale: TpchScale): { graph: Graph; wanted: string } {
  const graph: Graph = {};
  const partials: string[] = [];
  for (let p = 0; p < scale.partitions; p++) {
    graph[`tpch-${p}`] = { fn: { module: GENERATE, name: 'ordersPartition' }, args: [scale, p] };
    graph[`lineitem-${p}`] = { fn: builtins.getitem, args: [ref(`tpch-${p}`), 'lineitem'] };
    graph[`q1-partial-${p}`] = { fn: { module: MODULE, name: 'q1Partial' }, args: [ref(`lineitem-${p}`), Q1_SHIP_CUTOFF] };
    partials.push(`q1-partial-${p}`);
  }
  const wanted = treeReduce(graph, 'q1-merge', partials, { module: MODULE, name: 'q1Merge' });
  return { graph, wanted };
}

/** The result rows from the merged groups, ordered by return flag and line status. */
export function q1Rows(groups: readonly Q1Group[]): Q1Row[] {
  return [...groups]
    .sort((a, b) => order(a.flag, RETURN_FLAGS) - order(b.flag, RETURN_FLAGS) || order(a.status, LINE_STATUSES) - order(b.status, LINE_STATUSES))
    .map((g) => ({
      l_returnflag: g.flag,
      l_linestatus: g.status,
      sum_qty: decimal(BigInt(g.quantity), 0),
      sum_base_price: decimal(BigInt(g.base), 2),
      sum_disc_price: decimal(g.discPrice, 4),
      sum_charge: decimal(g.charge, 6),
      avg_qty: ratio(BigInt(g.quantity), BigInt(g.count)),
      avg_price: ratio(BigInt(g.base), 100n * BigInt(g.count)),
      avg_disc: ratio(BigInt(g.discount), 100n * BigInt(g.count)),
      count_order: g.count,
    }));
}

const order = (value: string, names: readonly string[]): number => names.indexOf(value);

/** Q1 computed in this process, row by row over freshly generated partitions: the workload's own check. */
export async function q1Reference(scale: TpchScale): Promise<Q1Row[]> {
  let groups: Q1Group[] = [];
  for (let p = 0; p < scale.partitions; p++) {
    groups = q1Merge(groups, q1Partial(generateOrders(scale, p).lineitem, Q1_SHIP_CUTOFF));
    await yieldToLoop();
  }
  return q1Rows(groups);
}

export type { Decimal };
