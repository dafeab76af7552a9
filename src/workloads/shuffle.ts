/**
 * `shuffle`: an all-to-all exchange. Input partition i (generated on a worker from a seed)
 * is split into P pieces by a hash of each value; output j concatenates piece j of every
 * input, so every worker fetches pieces from every other one. A small summary per output
 * (count, sum, fingerprint, misplaced values) comes back to the client, which checks it
 * against the same figures computed by regenerating the inputs itself.
 *
 * The task functions are exported from this module, which every worker imports.
 */
import type { Graph } from '../cluster/protocol.js';
import { builtins, ref } from '../cluster/protocol.js';
import { shuffle } from '../shuffle/protocol.js';
import { DEFAULT_SEED, allocFloat64, elementsPerPartition, mix32, nextState, partitionSeed, type GraphOptions, type GraphPlan, type Verification, yieldToLoop } from './common.js';

const MODULE = import.meta.url;
/** Values are integers below 2^20: a partition's sum stays exact far beyond 2^40 elements. */
const VALUE_BITS = 20;
const BUCKET_SALT = 0x51ed270b;
const PRINT_SALT = 0x2f0b3c19;

export interface ShuffleSummary {
  count: number;
  sum: number;
  /** Sum mod 2^32 of a hash of every value: order-free, catches swapped values a sum would miss. */
  fingerprint: number;
  /** Values whose bucket is not this output's. */
  misplaced: number;
}

/**
 * The hash scaled to [0, parts): a multiply, where `%` of a 32-bit unsigned hash is a
 * floating-point remainder in V8 and doubles the cost of a split's first pass. Exact:
 * hash × parts < 2^48.
 */
const bucketOf = (x: number, parts: number): number => (mix32(x, BUCKET_SALT) * parts * 2 ** -32) | 0;

// ---- task functions -----------------------------------------------------------------

/** Input partition `index`: `count` integer values from the run's seed. */
export function generate(seed: number, index: number, count: number): Float64Array {
  const out = allocFloat64(count);
  let s = partitionSeed(seed, index);
  for (let i = 0; i < count; i++) {
    s = nextState(s);
    out[i] = s >>> (32 - VALUE_BITS);
  }
  return out;
}

/** Splits a partition into `parts` pieces by the hash of each value (two passes, no growing arrays). */
export function split(data: Float64Array, parts: number): Float64Array[] {
  const buckets = new Uint16Array(data.length); // parts ≤ 65536 (checked by shuffleGraph)
  const sizes = new Uint32Array(parts);
  for (let i = 0; i < data.length; i++) {
    const b = bucketOf(data[i], parts);
    buckets[i] = b;
    sizes[b]++;
  }
  const pieces = Array.from(sizes, (n) => allocFloat64(n));
  const fill = new Uint32Array(parts);
  for (let i = 0; i < data.length; i++) {
    const b = buckets[i];
    pieces[b][fill[b]++] = data[i];
  }
  return pieces;
}

/** Output partition: piece j of every input, one after the other. */
export function concat(pieces: Float64Array[]): Float64Array {
  const out = allocFloat64(pieces.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const piece of pieces) {
    out.set(piece, at);
    at += piece.length;
  }
  return out;
}

/** How many values each piece of one input holds. */
export function countPieces(pieces: Float64Array[]): number[] {
  return pieces.map((p) => p.length);
}

/** The rows of counts, one per input. */
export function collect(rows: number[][]): number[][] {
  return rows;
}

/**
 * Values summarized per call of `summarizeRange`. V8 compiles a long loop while it runs
 * (on-stack replacement), before the code after the loop has ever run; a property or
 * element store there lacks type feedback and sends the call back to the interpreter,
 * and a process can keep reusing that compiled loop for every later call. So the loop
 * runs over short ranges, called many times, and leaves its figures in module variables,
 * whose stores need no feedback.
 */
const SUMMARY_RANGE = 65_536;
let rangeSum = 0;
let rangeFingerprint = 0;
let rangeMisplaced = 0;

/** The figures the client checks for output `j`. */
export function summarize(data: Float64Array, j: number, parts: number): ShuffleSummary {
  let sum = 0;
  let fingerprint = 0;
  let misplaced = 0;
  for (let at = 0; at < data.length; at += SUMMARY_RANGE) {
    summarizeRange(data, at, Math.min(at + SUMMARY_RANGE, data.length), j, parts);
    sum += rangeSum;
    fingerprint = (fingerprint + rangeFingerprint) >>> 0;
    misplaced += rangeMisplaced;
  }
  return { count: data.length, sum, fingerprint, misplaced };
}

/** Sets `rangeSum`, `rangeFingerprint` and `rangeMisplaced` to the figures of `data[start..end)`. */
function summarizeRange(data: Float64Array, start: number, end: number, j: number, parts: number): void {
  let sum = 0;
  let fingerprint = 0;
  let misplaced = 0;
  for (let i = start; i < end; i++) {
    const x = data[i];
    sum += x;
    fingerprint = (fingerprint + mix32(x, PRINT_SALT)) >>> 0;
    if (bucketOf(x, parts) !== j) misplaced++;
  }
  rangeSum = sum;
  rangeFingerprint = fingerprint;
  rangeMisplaced = misplaced;
}

// ---- graph and verification ---------------------------------------------------------

/** How the exchange runs: `p2p`, the shuffle primitive (2P + 1 tasks, pieces pushed between workers), or `tasks`, a task per piece (P² tasks). */
export type ShuffleMethod = 'p2p' | 'tasks';
export const SHUFFLE_METHODS: readonly ShuffleMethod[] = ['p2p', 'tasks'];

export interface ShuffleOptions extends GraphOptions {
  /** Default `p2p`. */
  method?: ShuffleMethod;
}

/** `wanted`: with `tasks`, `piece-counts` (values per input and piece) first; then `check-j` for every output j. */
export type ShufflePlan = GraphPlan;

export function shuffleGraph(options: ShuffleOptions): ShufflePlan {
  return (options.method ?? 'p2p') === 'p2p' ? p2pShuffleGraph(options) : taskShuffleGraph(options);
}

/** What an exchange adds to the graph: `output-j` for every j, and keys wanted before the checks (with their verification). */
interface Exchange {
  wantedFirst: string[];
  /** `results[0]` holds the piece counts (the `piece-counts` key), checked too. */
  checkCounts: boolean;
}

type FunctionRefOf = (name: string) => { module: string; name: string };

/** Inputs generated from the seed, the exchange, and a `check-j` summary of every output: one plan for both methods. */
function shufflePlan(options: ShuffleOptions, exchange: (graph: Graph, inputs: string[], fn: FunctionRefOf, P: number) => Exchange): ShufflePlan {
  const P = options.partitions;
  const seed = options.seed ?? DEFAULT_SEED;
  const count = elementsPerPartition(options.bytes, P);
  const fn: FunctionRefOf = (name) => ({ module: MODULE, name });
  const graph: Graph = {};
  const inputs: string[] = [];
  for (let i = 0; i < P; i++) {
    graph[`input-${i}`] = { fn: fn('generate'), args: [seed, i, count] };
    inputs.push(`input-${i}`);
  }
  const { wantedFirst, checkCounts } = exchange(graph, inputs, fn, P);
  const wanted = [...wantedFirst];
  for (let j = 0; j < P; j++) {
    graph[`check-${j}`] = { fn: fn('summarize'), args: [ref(`output-${j}`), j, P] };
    wanted.push(`check-${j}`);
  }
  return {
    graph,
    wanted,
    dataBytes: count * 8 * P,
    elements: count * P,
    verify: (results) => verifyShuffle(checkCounts ? results : [null, ...results], seed, P, count, checkCounts),
  };
}

/** The shuffle primitive: inputs split and pushed where their outputs live, outputs concatenated there. */
function p2pShuffleGraph(options: ShuffleOptions): ShufflePlan {
  return shufflePlan(options, (graph, inputs, fn) => {
    const nodes = shuffle({ id: 'shuffle', inputs, split: fn('split'), combine: fn('concat'), outputKey: (j) => `output-${j}` });
    Object.assign(graph, nodes.graph);
    return { wantedFirst: [], checkCounts: false };
  });
}

function taskShuffleGraph(options: ShuffleOptions): ShufflePlan {
  return shufflePlan(options, (graph, inputs, fn, P) => {
    for (let i = 0; i < P; i++) {
      graph[`split-${i}`] = { fn: fn('split'), args: [ref(inputs[i]), P] };
      // Built-in getitem: runs on the worker's loop, so the split is not copied into a thread once per piece.
      for (let j = 0; j < P; j++) graph[`piece-${i}-${j}`] = { fn: builtins.getitem, args: [ref(`split-${i}`), j] };
      graph[`counts-${i}`] = { fn: fn('countPieces'), args: [Array.from({ length: P }, (_, j) => ref(`piece-${i}-${j}`))] };
    }
    // Wanted first, so the scheduler's depth-first order runs every piece of split i right
    // after it (while it is in memory) instead of reading it back once per output.
    graph['piece-counts'] = { fn: fn('collect'), args: [Array.from({ length: P }, (_, i) => ref(`counts-${i}`))] };
    for (let j = 0; j < P; j++) graph[`output-${j}`] = { fn: fn('concat'), args: [Array.from({ length: P }, (_, i) => ref(`piece-${i}-${j}`))] };
    return { wantedFirst: ['piece-counts'], checkCounts: true };
  });
}

/**
 * Regenerates every input on this side, a slice at a time, and compares each output's
 * summary (and, with `checkCounts`, the piece counts that `results[0]` holds).
 */
export async function verifyShuffle(results: readonly unknown[], seed: number, P: number, count: number, checkCounts = true): Promise<Verification> {
  const expected = Array.from({ length: P }, () => ({ count: 0, sum: 0, fingerprint: 0 }));
  const counts = Array.from({ length: P }, () => new Array<number>(P).fill(0));
  const SLICE = 1 << 20;
  for (let i = 0; i < P; i++) {
    let s = partitionSeed(seed, i);
    for (let from = 0; from < count; from += SLICE) {
      const to = Math.min(count, from + SLICE);
      for (let k = from; k < to; k++) {
        s = nextState(s);
        const x = s >>> (32 - VALUE_BITS);
        const b = bucketOf(x, P);
        counts[i][b]++;
        const e = expected[b];
        e.count++;
        e.sum += x;
        e.fingerprint = (e.fingerprint + mix32(x, PRINT_SALT)) >>> 0;
      }
      await yieldToLoop();
    }
  }
  const problems: string[] = [];
  if (results.length !== P + 1) problems.push(`expected piece counts and ${P} summaries, got ${results.length} values`);
  const [gotCounts, ...summaries] = results;
  if (checkCounts && JSON.stringify(gotCounts) !== JSON.stringify(counts)) problems.push('the pieces of the splits do not hold the expected counts');
  summaries.forEach((value, j) => {
    const got = value as Partial<ShuffleSummary> | null;
    const e = expected[j];
    if (got === null || typeof got !== 'object') return problems.push(`output ${j}: not a summary`);
    if (got.count !== e.count) problems.push(`output ${j}: ${got.count} values, expected ${e.count}`);
    if (got.sum !== e.sum) problems.push(`output ${j}: sum ${got.sum}, expected ${e.sum}`);
    if (got.fingerprint !== e.fingerprint) problems.push(`output ${j}: fingerprint ${got.fingerprint}, expected ${e.fingerprint}`);
    if (got.misplaced !== 0) problems.push(`output ${j}: ${got.misplaced} values belong to another output`);
  });
  return { verified: problems.length === 0, problems };
}
