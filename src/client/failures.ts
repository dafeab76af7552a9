import type { KeyErredParams } from '../cluster/protocol.js';
import { DiskFullError, KilledWorkerError, MemoryHintError, NoWorkersError, TaskError } from '../errors.js';

/** The typed error for a failed wanted key: the cluster's own verdicts have their classes, a task's exception is a TaskError. */
export function taskFailure(key: string, params: KeyErredParams): Error {
  switch (params.error?.code) {
    case 'SPW_ERR_KILLED_WORKER':
      return new KilledWorkerError(key, params.failedKey, params.error);
    case 'SPW_ERR_NO_WORKERS':
      return new NoWorkersError(key, params.failedKey, params.error);
    case 'SPW_ERR_MEMORY_HINT':
      return new MemoryHintError(key, params.failedKey, params.error);
    case 'SPW_ERR_DISK_FULL':
      return new DiskFullError(key, params.failedKey, params.error);
    default:
      return new TaskError(key, params.failedKey, params.error);
  }
}
