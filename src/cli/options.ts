/** Commander argument parsers and shared flags of the `spillway` commands. */
import { InvalidArgumentError as BadOption } from 'commander';
import { InvalidArgumentError } from '../errors.js';
import { parseBytes } from '../units.js';

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

/** A timer's delay in whole milliseconds (0 allowed). */
export function milliseconds(value: string): number {
  return timerDelay(wholeNumber(value));
}

/** A timer's delay in whole milliseconds, at least 1. */
export function positiveMilliseconds(value: string): number {
  return timerDelay(positive(value));
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

/** The token from --token, else from SPILLWAY_TOKEN (which keeps it out of `ps`); empty means none. */
export function resolveToken(flag: string | undefined): string | undefined {
  const token = flag ?? process.env.SPILLWAY_TOKEN;
  return token === undefined || token === '' ? undefined : token;
}

/** One JSON line on stdout: how a parent process (LocalCluster) learns what a command is doing. */
export function announce(event: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

/**
 * Runs a service until SIGINT or SIGTERM (or stdin closing, when a parent asked for that
 * with SPILLWAY_EXIT_WITH_STDIN=1, so it cannot outlive the parent), then closes it.
 * A second signal exits at once.
 */
export function runUntilStopped(name: string, close: () => Promise<void>, closed?: Promise<unknown>): void {
  let stopping = false;
  // A signal is an orderly stop (exit 0); losing the connection is a failure (exit 1), so
  // a supervisor (systemd, Kubernetes) restarts the process.
  const stop = (reason: string, code = 0): void => {
    if (stopping) {
      process.exit(EXIT_FAILED);
    }
    stopping = true;
    close().then(
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
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  if (process.env.SPILLWAY_EXIT_WITH_STDIN === '1') {
    process.stdin.on('end', () => stop('parent gone')).on('error', () => stop('parent gone'));
    process.stdin.resume();
  }
  void closed?.then(() => stop('connection lost', EXIT_FAILED));
}
