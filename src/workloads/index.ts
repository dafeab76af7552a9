import type { Graph } from '../cluster/protocol.js';
import { InvalidArgumentError } from '../errors.js';
import type { Verification } from './common.js';
import { mapReduceGraph } from './map-reduce.js';
import { type ShuffleMethod, shuffleGraph } from './shuffle.js';
import { tpchPlan } from './tpch/index.js';
import type { WorkloadName } from './names.js';

export { SHUFFLE_METHODS, type ShuffleMethod } from './shuffle.js';

export { DEFAULT_SEED, type Verification } from './common.js';

export { WORKLOADS, type WorkloadName } from './names.js';

/** A built-in job: its graph, the keys to gather, and the check of their values. */
export interface WorkloadPlan {
  name: WorkloadName;
  graph: Graph;
  wanted: string[];
  partitions: number;
  /** Bytes of generated data (inputs), after rounding to whole elements. */
  dataBytes: number;
  verify(results: readonly unknown[]): Promise<Verification>;
  /** A query's answer, as rows to print (the TPC-H workloads). */
  rows?(results: readonly unknown[]): object[];
}

export interface WorkloadOptions {
  /** Bytes of data to generate in all. */
  bytes: number;
  partitions: number;
  seed?: number;
  /** How a shuffle exchanges its data (default `p2p`); map-reduce ignores it. */
  method?: ShuffleMethod;
}

/**
 * Default partitions: each at most 1/20 of a worker's memory limit. A task holds its
 * inputs, a copy of them in its thread and its output at once, beside the Node process
 * itself: larger partitions push a shuffle's workers over their limit, smaller ones are no
 * lower and slower (docs/benchmarks.md, Cluster).
 */
export const PARTITIONS_PER_WORKER_MEMORY = 20;

export function defaultPartitions(bytes: number, memoryLimit: number, workers: number): number {
  return Math.min(256, Math.max(2 * workers, Math.ceil(bytes / (memoryLimit / PARTITIONS_PER_WORKER_MEMORY))));
}

/** A task-based shuffle's graph grows with P²: more than this does not fit one submit frame. */
export const MAX_SHUFFLE_PARTITIONS = 512;

/** One partition is one value: at most 2 GiB. */
export const MAX_PARTITION_BYTES = 2 ** 31;

export function planWorkload(name: WorkloadName, options: WorkloadOptions): WorkloadPlan {
  const { bytes, partitions } = options;
  if (!Number.isSafeInteger(partitions) || partitions < 1 || partitions > 4096) {
    throw new InvalidArgumentError(`partitions must be an integer from 1 to 4096, got ${partitions}`);
  }
  if (options.method !== undefined && options.method !== 'p2p' && options.method !== 'tasks') {
    throw new InvalidArgumentError(`method must be p2p or tasks, got ${String(options.method)}`);
  }
  // A task-based shuffle's graph grows with P² and is submitted in one control frame, which
  // it outgrows past MAX_SHUFFLE_PARTITIONS; the p2p shuffle's grows with P.
  if (name === 'shuffle' && options.method === 'tasks' && partitions > MAX_SHUFFLE_PARTITIONS) {
    throw new InvalidArgumentError(
      `a task-based shuffle of ${partitions} partitions is ${partitions * (partitions + 5) + 1} tasks, too many to submit; use at most ${MAX_SHUFFLE_PARTITIONS} or --method p2p`,
    );
  }
  // Refused before anything runs, as the demo does: a partition over the cap would fail only
  // after minutes of generating and moving data.
  if (bytes / partitions > MAX_PARTITION_BYTES) {
    throw new InvalidArgumentError(`partitions of ${Math.ceil(bytes / partitions)} bytes are too large (at most ${MAX_PARTITION_BYTES}): use more partitions`);
  }
  if (!(bytes >= 16 * partitions)) throw new InvalidArgumentError(`size ${bytes} is too small for ${partitions} partitions`);
  if (name === 'tpch-q1' || name === 'tpch-q3') {
    const plan = tpchPlan(name === 'tpch-q1' ? 'q1' : 'q3', options);
    return { name, partitions, graph: plan.graph, wanted: plan.wanted, dataBytes: plan.dataBytes, verify: plan.verify, rows: plan.rows };
  }
  const plan = name === 'shuffle' ? shuffleGraph(options) : mapReduceGraph(options);
  return { name, partitions, ...plan };
}
