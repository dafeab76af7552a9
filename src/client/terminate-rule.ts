/**
 * The RSS above which the supervisor kills a worker (`--terminate`). Two bounds, the lower wins:
 *
 * - **Its budget.** The memory limit bounds what the worker's store holds (it spills and
 *   pauses against it); the tasks running hold their inputs and their own allocations on top,
 *   up to as much again before the worker's queue stops giving them more. The runtime's own
 *   footprint (V8, the loaded modules, the task threads) is not the user's to choose and cannot
 *   be spilled, so it is measured when the worker registers and excused: the worker is killed
 *   once its RSS passes that footprint plus `terminate` × twice its limit (at least
 *   `terminate` × MIN_ALLOWANCE_BYTES). A task allocating twice the limit passes it; a small
 *   worker whose transfers and threads overshoot its limit a little does not.
 * - **The kernel's ceiling.** The kill must come before the kernel's OOM killer, which acts at
 *   the container's (cgroup) limit, else the host's memory, shared by the host's workers:
 *   the worker is killed once its RSS passes `terminate` × its share of that ceiling. With
 *   `--memory-limit auto` the share is the limit itself, so there the rule is Dask's,
 *   `terminate` × the limit, footprint included.
 */
export interface TerminateRule {
  /** RSS of the worker when it registered (bytes). */
  footprint: number;
  /** Its memory limit (bytes). */
  limit: number;
  /** The fraction (`--terminate`, above 0). */
  terminate: number;
  /** The memory the kernel lets the workers of this host have together (bytes). */
  ceiling: number;
  /** Workers sharing that ceiling (the supervisor's). */
  workers: number;
}

/**
 * The least allowance on top of the footprint, whatever the limit: what the runtime adds after
 * registration (task threads starting and loading the task modules, socket and transfer buffers, heap growth) does not shrink
 * with the limit, so a worker with a limit of a few MiB is policed at this scale, for runaways.
 */
export const MIN_ALLOWANCE_BYTES = 256 * 1024 * 1024;

export function terminateThreshold(rule: TerminateRule): number {
  const budget = rule.footprint + rule.terminate * Math.max(2 * rule.limit, MIN_ALLOWANCE_BYTES);
  const kernel = (rule.terminate * rule.ceiling) / rule.workers;
  return Math.min(budget, kernel);
}
