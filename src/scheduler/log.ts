import { pino } from 'pino';

/** The logging calls the scheduler makes (a pino logger fits). */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

const silent: Logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

/** The given logger; else pino on stderr when SPILLWAY_LOG names a level; else silent (tests stay quiet). */
export function resolveLogger(logger: Logger | undefined): Logger {
  if (logger !== undefined) return logger;
  const level = process.env.SPILLWAY_LOG;
  if (level === undefined || level === '' || level === 'silent') return silent;
  return pino({ name: 'spillway-scheduler', level }, pino.destination(2));
}
