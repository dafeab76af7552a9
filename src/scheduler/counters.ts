/** What the scheduler has counted since it started (in /api/state and the metrics). */
export interface Counters {
  tasksFinished: number;
  tasksErred: number;
  /** Tasks computed again after their result had reached memory once (its holders were lost). */
  tasksRecomputed: number;
  /** Reruns of tasks that threw, allowed by their spec's `retries`. */
  tasksRetried: number;
  /** Tasks failed with SPW_ERR_KILLED_WORKER: more of their workers died than `allowedFailures`. */
  tasksKilledWorkers: number;
  /** Tasks failed with SPW_ERR_NO_WORKERS: ready while no worker could run them for `noWorkersTimeoutMs`. */
  tasksNoWorkers: number;
  /** Copies a worker found corrupt (checksum, unreadable) and dropped; the key is recomputed if no other holder has it. */
  corruptCopies: number;
  workersLost: number;
  /** Workers that left after `worker-closing` (retired), counted apart from the ones lost. */
  workersRetired: number;
  /** Keys a retiring worker alone held, copied to another worker before it left. */
  keysHandedOver: number;
}

export function newCounters(): Counters {
  return {
    tasksFinished: 0,
    tasksErred: 0,
    tasksRecomputed: 0,
    tasksRetried: 0,
    tasksKilledWorkers: 0,
    tasksNoWorkers: 0,
    corruptCopies: 0,
    workersLost: 0,
    workersRetired: 0,
    keysHandedOver: 0,
  };
}
