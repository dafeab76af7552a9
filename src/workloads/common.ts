/**
 * Helpers shared by the built-in workloads: a seeded generator of integer-valued data
 * (so sums are exact in float64), hashes, and tree reductions over a graph.
 */
import type { Graph, TaskSpec } from '../cluster/protocol.js';
import { ref } from '../cluster/protocol.js';

/** The seed of a built-in workload's data when none is given. */
export const DEFAULT_SEED = 0x5eed;

/** A nonzero 32-bit seed for partition `index` of a run seeded with `seed`. */
export function partitionSeed(seed: number, index: number): number {
  let h = (Math.imul(index + 1, 0x9e3779b1) ^ seed) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = (h ^ (h >>> 13)) >>> 0;
  return h === 0 ? 0x2545f491 : h;
}

/** xorshift32: returns the next state (never 0 from a nonzero state). */
export function nextState(x: number): number {
  x ^= x << 13;
  x ^= x >>> 17;
  x ^= x << 5;
  return x >>> 0;
}

/** A 32-bit mix of an integer value (murmur3 finalizer). */
export function mix32(x: number, salt: number): number {
  let h = (x ^ salt) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * Float64 storage for task results: a plain ArrayBuffer, which the worker moves out of its
 * task thread (transfer list) without copying. A SharedArrayBuffer would be shared instead
 * and stay alive until the thread's own GC runs, so values the store had spilled would
 * stay alive ("detached") and a worker's peak RSS would double.
 */
export function allocFloat64(length: number): Float64Array {
  return new Float64Array(length);
}

/** Elements per partition so that `partitions` of them hold about `bytes` (a multiple of `multiple`). */
export function elementsPerPartition(bytes: number, partitions: number, multiple = 1): number {
  const n = Math.floor(bytes / 8 / partitions);
  return Math.max(multiple, n - (n % multiple));
}

/**
 * Adds a binary tree that combines `keys` pairwise with `fn(a, b)` under `prefix-<level>-<i>`;
 * returns the root's key. Fan-in 2 keeps every reduction task's inputs small and local.
 */
export function treeReduce(graph: Graph, prefix: string, keys: readonly string[], fn: TaskSpec['fn']): string {
  if (keys.length === 0) throw new RangeError('treeReduce needs at least one key');
  let level = [...keys];
  for (let depth = 0; level.length > 1; depth++) {
    const next: string[] = [];
    for (let i = 0; i < level.length; i += 2) {
      if (i + 1 === level.length) {
        next.push(level[i]);
        continue;
      }
      const key = `${prefix}-${depth}-${i / 2}`;
      graph[key] = { fn, args: [ref(level[i]), ref(level[i + 1])] };
      next.push(key);
    }
    level = next;
  }
  return level[0];
}

/** Lets other callbacks run between slices of CPU-bound client-side verification. */
export { yieldToLoop } from '../loop.js';

/** The outcome of checking a workload's result. */
export interface Verification {
  verified: boolean;
  /** One line per check that failed (empty when verified). */
  problems: string[];
}

/** What both built-in workloads take: data size, partitions, seed. */
export interface GraphOptions {
  /** Bytes of input data in all (rounded down to whole elements per partition). */
  bytes: number;
  partitions: number;
  seed?: number;
}

/** A workload's graph, the keys to fetch, and the check of what they hold. */
export interface GraphPlan {
  graph: Graph;
  wanted: string[];
  dataBytes: number;
  elements: number;
  verify(results: readonly unknown[]): Promise<Verification>;
}
