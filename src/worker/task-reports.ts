import type { EventEmitter } from 'node:events';
import { type DataAddress, Methods, type TaskErrorInfo, type TaskFinishedParams } from '../cluster/protocol.js';
import { SpillwayError } from '../errors.js';
import type { Logger } from '../log.js';
import type { SchedulerLink } from './scheduler-link.js';

/**
 * What the worker tells the scheduler about its tasks, with the matching events on the
 * worker: one place for the message shapes and the worker id they carry.
 */
export class TaskReports {
  readonly #link: SchedulerLink;
  readonly #log: Logger;
  readonly #events: EventEmitter;

  constructor(link: SchedulerLink, log: Logger, events: EventEmitter) {
    this.#link = link;
    this.#log = log;
    this.#events = events;
  }

  /** The task's inputs are pinned and it starts: from here a death of this process counts against it. */
  started(key: string): void {
    this.#link.notify(Methods.taskStarted, { workerId: this.#link.workerId, key });
  }

  finished(finished: Omit<TaskFinishedParams, 'workerId'>): void {
    const params = { workerId: this.#link.workerId, ...finished };
    this.#link.notify(Methods.taskFinished, params);
    this.#events.emit('task-finished', params);
  }

  erred(key: string, error: TaskErrorInfo): void {
    const params = { workerId: this.#link.workerId, key, error };
    this.#log.debug({ key, error: `${error.name}: ${error.message}`, code: error.code }, 'task erred');
    this.#link.notify(Methods.taskErred, params);
    this.#events.emit('task-erred', params);
  }

  /** Input `key` of `task` could not be had from `holders` (or, `corrupt`, its copy here was bad). */
  missing(task: string, key: string, holders: DataAddress[], corrupt?: true): void {
    this.#link.notify(Methods.missingData, { workerId: this.#link.workerId, task, key, holders, ...(corrupt ? { corrupt } : {}) });
  }

  /** Gives tasks back to the scheduler to place elsewhere: this worker is leaving. */
  giveBack(keys: string[]): void {
    this.#link.notify(Methods.workerClosing, { reschedule: keys });
  }
}

export function toErrorInfo(err: unknown): TaskErrorInfo {
  if (err instanceof Error) {
    return { name: err.name, message: err.message, stack: err.stack, code: err instanceof SpillwayError ? err.code : undefined };
  }
  return { name: 'Error', message: String(err) };
}
