import type { Graph } from '../cluster/protocol.js';
import { InvalidArgumentError } from '../errors.js';
import type { Verification } from './common.js';
import { mapReduceGraph } from './map-reduce.js';
import { shuffleGraph } from './shuffle.js';

export type { Verification } from './common.js';

export const WORKLOADS = ['shuffle', 'map-reduce'] as const;
export type WorkloadName = (typeof WORKLOADS)[number];

/** A built-in job: its graph, the keys to gather, and the check of their values. */
export interface WorkloadPlan {
  name: WorkloadName;
  graph: Graph;
  wanted: string[];
  partitions: number;
  /** Bytes of generated data (inputs), after rounding to whole elements. */
  dataBytes: number;
  verify(results: readonly unknown[]): Promise<Verification>;
}

export interface WorkloadOptions {
  /** Bytes of data to generate in all. */
  bytes: number;
  partitions: number;
  seed?: number;
}

export function isWorkloadName(name: string): name is WorkloadName {
  return (WORKLOADS as readonly string[]).includes(name);
}

/**
 * Partitions such that each is at most 1/8 of a worker's memory limit: a task pins its
 * inputs and makes an output of about the same size, and a worker runs a few at once.
 */
export function defaultPartitions(bytes: number, memoryLimit: number, workers: number): number {
  return Math.min(256, Math.max(2 * workers, Math.ceil(bytes / (memoryLimit / 8))));
}

export function planWorkload(name: WorkloadName, options: WorkloadOptions): WorkloadPlan {
  const { bytes, partitions } = options;
  if (!Number.isSafeInteger(partitions) || partitions < 1 || partitions > 4096) {
    throw new InvalidArgumentError(`partitions must be an integer from 1 to 4096, got ${partitions}`);
  }
  if (!(bytes >= 16 * partitions)) throw new InvalidArgumentError(`size ${bytes} is too small for ${partitions} partitions`);
  const plan = name === 'shuffle' ? shuffleGraph(options) : mapReduceGraph(options);
  return { name, partitions, ...plan };
}
