export { Scheduler, type SchedulerOptions } from './scheduler.js';
export { AlreadyRegisteredError, NotRegisteredError, WrongRoleError, LOST_INPUT_CODE } from './errors.js';
export type { Logger } from './log.js';
export type { SchedulerState, WorkerSnapshot } from './snapshot.js';
export type { TaskState } from './state.js';
export { validateSubmission, type ValidSubmission, type NewTask } from './graph.js';
