import { pino } from 'pino';
import { InvalidArgumentError } from './errors.js';

/** The logging calls Spillway's services make (a pino logger fits). */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const silentLogger: Logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

/** Checks a level name (a CLI flag, an environment variable); throws InvalidArgumentError naming the choices. */
export function checkLogLevel(value: string, what = 'log level'): LogLevel {
  const level = value.trim().toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new InvalidArgumentError(`${what} must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(value)}`);
  return level as LogLevel;
}

/** The level SPILLWAY_LOG_LEVEL (or its alias SPILLWAY_LOG) sets, else undefined. */
export function environmentLogLevel(): LogLevel | undefined {
  for (const name of ['SPILLWAY_LOG_LEVEL', 'SPILLWAY_LOG']) {
    const value = process.env[name];
    if (value !== undefined && value.trim() !== '') return checkLogLevel(value, name);
  }
  return undefined;
}

/**
 * A pino logger on stderr, written synchronously (a line logged just before process.exit
 * is not lost): JSON lines, or readable lines when stderr is a terminal (`pretty`).
 */
export function createLogger(name: string, level: LogLevel, options: { pretty?: boolean } = {}): Logger {
  if (level === 'silent') return silentLogger;
  const pretty = options.pretty ?? (process.stderr.isTTY === true && process.env.SPILLWAY_LOG_FORMAT !== 'json');
  const destination = pino.destination({ fd: 2, sync: true });
  return pino({ name, level }, pretty ? readableLines(destination) : destination);
}

/** The service's logger when none was given: pino on stderr when the environment names a level, else silent (tests stay quiet). */
export function defaultLogger(name: string): Logger {
  const level = environmentLogLevel();
  return level === undefined ? silentLogger : createLogger(name, level);
}

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const OMITTED = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg']);

/** Turns pino's JSON lines into `12:00:00.123 WARN  spillway-worker: message key=value ...` for a person at a terminal. */
function readableLines(out: { write(line: string): unknown }): { write(line: string): void } {
  return {
    write(line: string): void {
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(line) as Record<string, unknown>;
      } catch {
        out.write(line);
        return;
      }
      const time = new Date(typeof record.time === 'number' ? record.time : Date.now()).toISOString().slice(11, 23);
      const level = (LEVEL_NAMES[record.level as number] ?? String(record.level)).padEnd(5);
      const fields = Object.entries(record)
        .filter(([key]) => !OMITTED.has(key))
        .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
      out.write(`${time} ${level} ${String(record.name)}: ${String(record.msg ?? '')}${fields.length > 0 ? ' ' + fields.join(' ') : ''}\n`);
    },
  };
}
