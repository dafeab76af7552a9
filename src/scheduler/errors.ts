import type { TaskErrorInfo } from '../cluster/protocol.js';
import { SpillwayError, describeKey } from '../errors.js';

/** A peer called a scheduler method before registering (or while the scheduler closes). The channel is closed after it. */
export class NotRegisteredError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_NOT_REGISTERED', message);
  }
}

/** A peer called a method of the other role (a client reporting a finished task). */
export class WrongRoleError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_WRONG_ROLE', message);
  }
}

/** A channel tried to register a second time. */
export class AlreadyRegisteredError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_ALREADY_REGISTERED', message);
  }
}

/** Code of the error a task gets when one of its inputs was lost and cannot be recomputed. */
export const LOST_INPUT_CODE = 'SPW_ERR_LOST_INPUT';

/** Codes of the errors a task gets from the scheduler itself (no worker could run it, or it may not). */
export const KILLED_WORKER_CODE = 'SPW_ERR_KILLED_WORKER';
export const MEMORY_HINT_CODE = 'SPW_ERR_MEMORY_HINT';
export const NO_WORKERS_CODE = 'SPW_ERR_NO_WORKERS';

/** A task whose workers died more often than `allowedFailures` while it ran. */
export function killedWorkerError(key: string, worker: string, deaths: number): TaskErrorInfo {
  return {
    name: 'KilledWorkerError',
    message: `task ${describeKey(key)} was running on ${deaths} workers that died, the last one ${JSON.stringify(worker)}; it is not retried again (allowedFailures)`,
    code: KILLED_WORKER_CODE,
    worker,
  };
}

/** A ready task no worker could run for `waitedMs` (noWorkersTimeoutMs). */
export function noWorkersError(key: string, waitedMs: number): TaskErrorInfo {
  return {
    name: 'NoWorkersError',
    message: `task ${describeKey(key)} could not run: no worker for ${Math.round(waitedMs / 1000)} s (noWorkersTimeoutMs)`,
    code: NO_WORKERS_CODE,
  };
}

/** A task's input was lost and the scheduler has no task to recompute it from. */
export function lostInputError(key: string, task: string): TaskErrorInfo {
  return {
    name: 'LostInputError',
    message: `input ${describeKey(key)} of ${describeKey(task)} was lost and the scheduler has no task to recompute it`,
    code: LOST_INPUT_CODE,
  };
}
