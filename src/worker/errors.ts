import { SpillwayError } from '../errors.js';

/** A task's module could not be imported on the worker (not found, syntax error...). */
export class TaskImportError extends SpillwayError {
  readonly module: string;
  constructor(module: string, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super('SPW_ERR_TASK_IMPORT', `cannot import task module ${module}: ${reason}`, { cause });
    this.module = module;
  }
}

/** A task's module has no exported function of that name. */
export class TaskFunctionError extends SpillwayError {
  readonly module: string;
  readonly fn: string;
  constructor(module: string, fn: string, found: string) {
    super('SPW_ERR_TASK_FUNCTION', `task module ${module} has no exported function ${JSON.stringify(fn)} (found ${found})`);
    this.module = module;
    this.fn = fn;
  }
}

/** A built-in task function (`spillway:builtins`) got arguments it cannot work on. */
export class BuiltinArgumentError extends SpillwayError {
  readonly fn: string;
  constructor(fn: string, message: string) {
    super('SPW_ERR_BUILTIN_ARGUMENT', `${fn}: ${message}`);
    this.fn = fn;
  }
}
