import { SpillwayError } from '../errors.js';

/** A module could not be bundled for shipping: a syntax error, a relative import that is not there, a bundle too large. */
export class ModuleBundleError extends SpillwayError {
  readonly module: string;
  constructor(module: string, reason: string, options?: { cause?: unknown }) {
    super('SPW_ERR_MODULE_BUNDLE', `cannot bundle module ${module} for the workers: ${reason}`, options);
    this.module = module;
  }
}

/** A module (shipped or not) is outside the allow-list of the scheduler or of a worker. */
export class ModuleRefusedError extends SpillwayError {
  readonly module: string;
  constructor(module: string, message: string) {
    super('SPW_ERR_MODULE_REFUSED', message);
    this.module = module;
  }

  static outside(module: string, where: 'scheduler' | 'worker', allowed: readonly string[]): ModuleRefusedError {
    return new ModuleRefusedError(module, `module ${module} is not in the ${where}'s allow-list (${allowed.join(', ')})`);
  }
}

/** A graph names a shipped module the scheduler does not hold (never uploaded, or dropped to stay within its module cache limit). */
export class UnknownModuleError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_MODULE_UNKNOWN', message);
  }
}
