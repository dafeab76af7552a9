/** Commander argument parsers and shared flags of the `spillway` commands. */
import { InvalidArgumentError as BadOption } from 'commander';
import { InvalidArgumentError } from '../errors.js';
import { type LogLevel, checkLogLevel, environmentLogLevel } from '../log.js';
import { parseBytes } from '../units.js';
import { type MemoryLimitSpec, checkMemoryLimitSpec } from '../worker/memory-limit.js';

export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

/** Sizes: '256MiB', '1.5 GB', '4096'. */
export function size(value: string): number {
  try {
    const bytes = parseBytes(value, 'size');
    if (bytes <= 0) throw new InvalidArgumentError('must be more than 0 bytes');
    return bytes;
  } catch (err) {
    throw new BadOption(`${err instanceof Error ? err.message : String(err)}`);
  }
}

/** A worker's memory limit: a size ('4Gi', '512 MiB'), 'auto', or a fraction of 'auto' ('0.5'); resolved when the worker starts. */
export function memoryLimit(value: string): MemoryLimitSpec {
  try {
    checkMemoryLimitSpec(value);
  } catch (err) {
    throw new BadOption(`${err instanceof Error ? err.message : String(err)} (or 'auto', or a fraction of it such as 0.5)`);
  }
  return value.trim();
}

/** A store level: a fraction of the memory limit (0 to 1), or 'off'. */
export function levelOrOff(value: string): number | false {
  const text = value.trim().toLowerCase();
  if (text === 'off' || text === 'false') return false;
  const n = Number(text);
  if (text === '' || !Number.isFinite(n) || n < 0 || n > 1) throw new BadOption(`expected a fraction of the memory limit from 0 to 1, or 'off', got ${JSON.stringify(value)}`);
  return n;
}

/** A size, or 'off' (no limit). */
export function sizeOrOff(value: string): number | false {
  const text = value.trim().toLowerCase();
  return text === 'off' || text === 'false' ? false : size(value);
}

const DURATION_UNITS: ReadonlyMap<string, number> = new Map([['', 1], ['ms', 1], ['s', 1000], ['m', 60_000], ['min', 60_000], ['h', 3_600_000]]);

/** A duration: '120s', '2m', '500ms', or a number of milliseconds. */
export function duration(value: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(value);
  const factor = match === null ? undefined : DURATION_UNITS.get(match[2].toLowerCase());
  if (match === null || factor === undefined) throw new BadOption(`expected a duration such as 120s, 2m or 500ms, got ${JSON.stringify(value)}`);
  return timerDelay(Math.round(Number(match[1]) * factor));
}

export function wholeNumber(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) throw new BadOption(`expected a whole number, got ${JSON.stringify(value)}`);
  return n;
}

/** The longest timer delay: Node turns anything above it into 1 ms (TimeoutOverflowWarning). */
const MAX_TIMER_MS = 2 ** 31 - 1;

function timerDelay(n: number): number {
  if (n > MAX_TIMER_MS) throw new BadOption(`expected at most ${MAX_TIMER_MS} ms, got ${n}`);
  return n;
}

/** A duration of at least 1 ms: '500ms', '2s', or a number of milliseconds. */
export function positiveDuration(value: string): number {
  const ms = duration(value);
  if (ms < 1) throw new BadOption(`expected at least 1 ms, got ${JSON.stringify(value)}`);
  return ms;
}

/** A nice increment: 0 to 19. */
export function niceIncrement(value: string): number {
  const n = wholeNumber(value);
  if (n > 19) throw new BadOption(`expected 0 to 19, got ${n}`);
  return n;
}

export function positive(value: string): number {
  const n = wholeNumber(value);
  if (n < 1) throw new BadOption(`expected at least 1, got ${n}`);
  return n;
}

export function port(value: string): number {
  const n = wholeNumber(value);
  if (n > 65535) throw new BadOption(`not a port: ${n}`);
  return n;
}

export function hostPort(value: string): { host: string; port: number } {
  const match = /^\[?([^\]]+?)\]?:(\d+)$/.exec(value.trim());
  // Port 0 means "any free port" to a listener, but names no server to connect to.
  if (match === null || Number(match[2]) < 1 || Number(match[2]) > 65535) throw new BadOption(`expected HOST:PORT with a port from 1 to 65535, got ${JSON.stringify(value)}`);
  return { host: match[1], port: Number(match[2]) };
}

/** A `--log-level` value. */
export function logLevel(value: string): LogLevel {
  try {
    return checkLogLevel(value);
  } catch (err) {
    throw new BadOption(err instanceof Error ? err.message : String(err));
  }
}

/** The level from --log-level, else SPILLWAY_LOG_LEVEL, else info. */
export function resolveLogLevel(flag: string | undefined): LogLevel {
  return flag === undefined ? (environmentLogLevel() ?? 'info') : checkLogLevel(flag);
}

/** A fraction from 0 to 1 (0 turns the feature off). */
export function fraction(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1) throw new BadOption(`expected a fraction from 0 to 1, got ${JSON.stringify(value)}`);
  return n;
}

/** The token from --token or SPILLWAY_TOKEN (which keeps it out of `ps`); empty means none. */
export function resolveToken(flag: string | undefined): string | undefined {
  return flag === undefined || flag === '' ? undefined : flag;
}

/** One JSON line on stdout: how a parent process (LocalCluster) learns what a command is doing. */
export function announce(event: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

/**
 * Whether a Spillway parent started this process and watches it: CliProcess sets
 * SPILLWAY_EXIT_WITH_STDIN=1 and holds the other end of its stdin.
 */
export function startedByParent(): boolean {
  return process.env.SPILLWAY_EXIT_WITH_STDIN === '1';
}

/** Calls `gone` when the parent that started this process goes (its end of stdin closes). */
export function onParentGone(gone: () => void): void {
  process.stdin.on('end', gone).on('error', gone);
  process.stdin.resume();
}

/**
 * Runs a service until SIGINT, SIGTERM or SIGHUP (or stdin closing, when a parent asked for
 * that with SPILLWAY_EXIT_WITH_STDIN=1, so it cannot outlive the parent), then closes it;
 * `close` is told why. A second signal exits at once, unless a parent watches the process:
 * it shares the parent's process group, so a terminal's Ctrl-C (or systemd stopping the
 * group) reaches both, and the parent passes the same stop on. The service takes it once,
 * and the parent kills it if it must not wait.
 */
export function runUntilStopped(name: string, close: (reason: string) => Promise<void>, closed?: Promise<unknown>): void {
  let stopping = false;
  const parented = startedByParent();
  // A signal is an orderly stop (exit 0); losing the connection is a failure (exit 1), so
  // a supervisor (systemd, Kubernetes) restarts the process.
  const stop = (reason: string, code = 0): void => {
    if (stopping) {
      if (parented) return;
      process.exit(EXIT_FAILED);
    }
    stopping = true;
    close(reason).then(
      () => {
        announce('closed', { reason });
        process.exit(code);
      },
      (err: unknown) => {
        process.stderr.write(`spillway ${name}: error while closing: ${err instanceof Error ? err.message : String(err)}\n`);
        process.exit(EXIT_FAILED);
      },
    );
  };
  // SIGHUP (the terminal closed) is a stop like the others: the spill folder goes with it.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => stop(signal));
  if (parented) onParentGone(() => stop('parent gone'));
  void closed?.then(() => stop('connection lost', EXIT_FAILED));
}
