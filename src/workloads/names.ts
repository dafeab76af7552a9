/**
 * The built-in workloads' names and defaults, for the command line's options. Kept apart
 * from the workloads themselves: the TPC-H ones import apache-arrow, about 150 modules that
 * every process running the CLI (schedulers and workers too) would otherwise compile at start.
 */
export { DEFAULT_SEED } from './common.js';
export { SHUFFLE_METHODS } from './shuffle.js';

export const WORKLOADS = ['shuffle', 'map-reduce', 'tpch-q1', 'tpch-q3'] as const;
export type WorkloadName = (typeof WORKLOADS)[number];
