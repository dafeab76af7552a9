export { Worker } from './worker.js';
export type { WorkerOptions } from './options.js';
export { TaskFunctionError, TaskImportError } from './errors.js';
