import { type Logger, defaultLogger } from '../log.js';

export type { Logger } from '../log.js';

/** The given logger; else pino on stderr when SPILLWAY_LOG_LEVEL (or SPILLWAY_LOG) names a level; else silent. */
export function resolveLogger(logger: Logger | undefined): Logger {
  return logger ?? defaultLogger('spillway-scheduler');
}
