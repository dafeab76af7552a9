/**
 * The TPC-H workloads: `tpch-q1` and `tpch-q3` over generated orders and line items of
 * about the size asked for. Each checks its answer against the same query computed in the
 * client row by row over the same rows generated again (q1Reference, q3Reference); the
 * tests and the benchmark also check both against DuckDB.
 */
import type { Graph } from '../../cluster/protocol.js';
import { DEFAULT_SEED, type Verification } from '../common.js';
import { BYTES_PER_LINEITEM, type TpchScale, orderCount, scaleForBytes } from './generate.js';
import { type Q1Group, type Q1Row, q1Graph, q1Reference, q1Rows } from './q1.js';
import { type Q3Candidate, type Q3Row, q3Graph, q3Reference, q3Rows } from './q3.js';

export type TpchQuery = 'q1' | 'q3';

export interface TpchPlan {
  graph: Graph;
  wanted: string[];
  dataBytes: number;
  scale: TpchScale;
  /** The answer's rows from the values of `wanted`. */
  rows(results: readonly unknown[]): Q1Row[] | Q3Row[];
  verify(results: readonly unknown[]): Promise<Verification>;
}

/** The plan of `query` over about `bytes` of orders and line items in `partitions` partitions. */
export function tpchPlan(query: TpchQuery, options: { bytes: number; partitions: number; seed?: number }): TpchPlan {
  const scale: TpchScale = { scaleFactor: scaleForBytes(options.bytes), seed: options.seed ?? DEFAULT_SEED, partitions: options.partitions };
  const { graph, wanted } = query === 'q1' ? q1Graph(scale) : q3Graph(scale);
  const rows = (results: readonly unknown[]): Q1Row[] | Q3Row[] => (query === 'q1' ? q1Rows(results[0] as Q1Group[]) : q3Rows(results[0] as Q3Candidate[]));
  return {
    graph,
    wanted: [wanted],
    scale,
    dataBytes: orderCount(scale.scaleFactor) * (4 * BYTES_PER_LINEITEM + 16),
    rows,
    async verify(results) {
      const got = rows(results);
      const expected = query === 'q1' ? await q1Reference(scale) : await q3Reference(scale);
      return compareRows(got, expected);
    },
  };
}

/** Row by row, column by column (decimals are exact strings to the cent). */
export function compareRows(got: readonly object[], expected: readonly object[]): Verification {
  const problems: string[] = [];
  if (got.length !== expected.length) problems.push(`${got.length} rows, expected ${expected.length}`);
  for (let i = 0; i < Math.min(got.length, expected.length); i++) {
    for (const [column, value] of Object.entries(expected[i])) {
      const actual = (got[i] as Record<string, unknown>)[column];
      if (actual !== value) problems.push(`row ${i + 1} ${column}: ${String(actual)}, expected ${String(value)}`);
    }
  }
  return { verified: problems.length === 0, problems };
}

export type { Q1Row, Q3Row };
