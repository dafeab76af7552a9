/**
 * `map-reduce` ("subtract the mean"): P partitions of Float64 data are generated on the
 * workers; a tree reduction of (sum, count) gives the global mean; each partition then
 * computes its sum of squared deviations from that mean, tree-reduced to one total.
 * The data never leaves the worker that made it; only small numbers move.
 *
 * Exactness: partition i holds pairs (b_i + r, b_i - r) with integer r, and the offsets
 * b_i - B sum to zero over partitions, so the global mean is exactly B and every
 * deviation is an integer: all sums are exact in float64, and the client computes the
 * expected total by regenerating only the r's.
 */
import type { Graph } from '../cluster/protocol.js';
import { ref } from '../cluster/protocol.js';
import { DEFAULT_SEED, allocFloat64, elementsPerPartition, nextState, partitionSeed, treeReduce, type GraphOptions, type GraphPlan, type Verification, yieldToLoop } from './common.js';

const MODULE = import.meta.url;
/** The global mean. */
export const MEAN = 65536;
/** |r| < 2^10. */
const R_BITS = 10;

export interface SumCount {
  sum: number;
  count: number;
}

/** Partition i's offset from the mean: 2i - (P - 1), which sums to 0 over i. */
const offsetOf = (index: number, partitions: number): number => 2 * index - (partitions - 1);

/** The r of the next pair: a signed integer from the generator's state. */
const deviationOf = (s: number): number => (s >>> (32 - R_BITS - 1)) - (1 << R_BITS);

// ---- task functions -----------------------------------------------------------------

/** Partition `index`: `count` (even) values in pairs around its own base. */
export function generate(seed: number, index: number, partitions: number, count: number): Float64Array {
  const out = allocFloat64(count);
  const base = MEAN + offsetOf(index, partitions);
  let s = partitionSeed(seed, index);
  for (let i = 0; i < count; i += 2) {
    s = nextState(s);
    const r = deviationOf(s);
    out[i] = base + r;
    out[i + 1] = base - r;
  }
  return out;
}

export function sumCount(data: Float64Array): SumCount {
  let sum = 0;
  for (let i = 0; i < data.length; i++) sum += data[i];
  return { sum, count: data.length };
}

export function addSumCount(a: SumCount, b: SumCount): SumCount {
  return { sum: a.sum + b.sum, count: a.count + b.count };
}

export function mean(total: SumCount): number {
  return total.sum / total.count;
}

/** Σ (x - mean)² over one partition. */
export function squaredDeviations(data: Float64Array, m: number): number {
  let total = 0;
  for (let i = 0; i < data.length; i++) {
    const d = data[i] - m;
    total += d * d;
  }
  return total;
}

export function add(a: number, b: number): number {
  return a + b;
}

// ---- graph and verification ---------------------------------------------------------

export type MapReduceOptions = GraphOptions;

/** `wanted`: ['total', 'mean', 'ssd']: the (sum, count), the mean and the sum of squared deviations. */
export type MapReducePlan = GraphPlan;

export function mapReduceGraph(options: MapReduceOptions): MapReducePlan {
  const P = options.partitions;
  const seed = options.seed ?? DEFAULT_SEED;
  const count = elementsPerPartition(options.bytes, P, 2);
  const fn = (name: string): { module: string; name: string } => ({ module: MODULE, name });
  const graph: Graph = {};
  const partials: string[] = [];
  for (let i = 0; i < P; i++) {
    graph[`data-${i}`] = { fn: fn('generate'), args: [seed, i, P, count] };
    graph[`sum-${i}`] = { fn: fn('sumCount'), args: [ref(`data-${i}`)] };
    partials.push(`sum-${i}`);
  }
  const totalKey = treeReduce(graph, 'sum-tree', partials, fn('addSumCount'));
  // Stable names for the wanted keys, whatever the depth of the trees.
  graph.total = { fn: fn('addSumCount'), args: [ref(totalKey), { sum: 0, count: 0 }] };
  graph.mean = { fn: fn('mean'), args: [ref('total')] };
  const deviations: string[] = [];
  for (let i = 0; i < P; i++) {
    graph[`ssd-${i}`] = { fn: fn('squaredDeviations'), args: [ref(`data-${i}`), ref('mean')] };
    deviations.push(`ssd-${i}`);
  }
  const ssdKey = treeReduce(graph, 'ssd-tree', deviations, fn('add'));
  graph.ssd = { fn: fn('add'), args: [ref(ssdKey), 0] };
  return {
    graph,
    wanted: ['total', 'mean', 'ssd'],
    dataBytes: count * 8 * P,
    elements: count * P,
    verify: (results) => verifyMapReduce(results, seed, P, count),
  };
}

/** Expected figures from the r's alone (each pair contributes 2·offset² + 2·r²), a slice at a time. */
export async function verifyMapReduce(results: readonly unknown[], seed: number, P: number, count: number): Promise<Verification> {
  let ssd = 0;
  const SLICE = 1 << 20;
  for (let i = 0; i < P; i++) {
    const offset = offsetOf(i, P);
    let s = partitionSeed(seed, i);
    let squares = 0;
    for (let from = 0; from < count; from += SLICE) {
      const to = Math.min(count, from + SLICE);
      for (let k = from; k < to; k += 2) {
        s = nextState(s);
        const r = deviationOf(s);
        squares += r * r;
      }
      await yieldToLoop();
    }
    ssd += count * offset * offset + 2 * squares;
  }
  const [total, m, gotSsd] = results as [SumCount | undefined, unknown, unknown];
  const problems: string[] = [];
  const n = count * P;
  if (total?.count !== n) problems.push(`count ${total?.count}, expected ${n}`);
  if (total?.sum !== n * MEAN) problems.push(`sum ${total?.sum}, expected ${n * MEAN}`);
  if (m !== MEAN) problems.push(`mean ${String(m)}, expected ${MEAN}`);
  if (gotSsd !== ssd) problems.push(`sum of squared deviations ${String(gotSsd)}, expected ${ssd}`);
  return { verified: problems.length === 0, problems };
}
