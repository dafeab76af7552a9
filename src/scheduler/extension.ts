import type { TaskErrorInfo } from '../cluster/protocol.js';
import type { TaskRecord } from './state.js';
import type { WorkerRecord } from './workers.js';

/**
 * Decisions an extension (the shuffle's scheduler side, src/shuffle) takes part in. Every
 * hook is optional and called within the engine's event, so its records stay consistent.
 */
export interface EngineExtension {
  /** The only worker a ready task may run on, or undefined for anywhere. */
  restrictedTo?(record: TaskRecord): string | undefined;
  /** False: this finished task's result is stale; the worker releases it and the task runs again. */
  acceptResult?(record: TaskRecord, worker: WorkerRecord): boolean;
  /** True: this error means "run it again once its inputs are back", not a failure. */
  retryError?(record: TaskRecord, error: TaskErrorInfo): boolean;
  /** A worker was removed; called after the engine's own bookkeeping, before tasks are placed. */
  workerRemoved?(worker: WorkerRecord): void;
  /** A worker started retiring; called before what waited for it is placed elsewhere. */
  workerClosing?(worker: WorkerRecord): void;
  /** A task's result was stored; called before tasks are placed. */
  finished?(record: TaskRecord): void;
  /** True: this retiring worker still has something to hand over; it is not told `retired` yet. */
  holds?(worker: WorkerRecord): boolean;
  /** The scheduler forgot a task (nobody needs it or refers to it any more). */
  forgotten?(record: TaskRecord): void;
}
