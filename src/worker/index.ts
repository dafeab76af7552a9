export { Worker } from './worker.js';
export type { WorkerOptions } from './options.js';
export type { MemoryLimitSpec } from './memory-limit.js';
export { BuiltinArgumentError, TaskFunctionError, TaskImportError } from './errors.js';
export { confineOldSpaceFloor, mallocArenas, mallocThresholds, oldSpaceFloorArguments, tunedEnvironment, type WorkerShape } from '../runtime/tuned-environment.js';
