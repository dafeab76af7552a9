import { InvalidArgumentError } from './errors.js';

// A Map, not an object literal: a lookup like UNITS['constructor'] must not find
// Object.prototype members ('5 constructor' would parse as NaN bytes).
const UNITS: ReadonlyMap<string, number> = new Map(Object.entries({
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  ki: 2 ** 10,
  mi: 2 ** 20,
  gi: 2 ** 30,
  ti: 2 ** 40,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
  k: 2 ** 10,
  m: 2 ** 20,
  g: 2 ** 30,
  t: 2 ** 40,
}));

/** Bytes from a number or a string such as '512 MiB', '1.5GB', '256mib', '4096'. */
export function parseBytes(input: number | string, what = 'size'): number {
  if (typeof input === 'number') {
    if (!Number.isFinite(input) || input < 0) throw new InvalidArgumentError(`${what} must be a non-negative number of bytes, got ${input}`);
    const bytes = Math.floor(input);
    if (!Number.isSafeInteger(bytes)) throw new InvalidArgumentError(`${what}: ${input} bytes is too large`);
    return bytes;
  }
  if (typeof input !== 'string') throw new InvalidArgumentError(`${what} must be a number or a string like '512 MiB'`);
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(input);
  const factor = match === null ? undefined : UNITS.get((match[2] || 'b').toLowerCase());
  if (match === null || factor === undefined) {
    throw new InvalidArgumentError(`${what}: cannot read ${JSON.stringify(input)} as a size (examples: 4096, '512 MiB', '2GB')`);
  }
  const bytes = Math.floor(Number(match[1]) * factor);
  // '9999…9' overflows to Infinity, and above 2^53 bytes are no longer exact (and print as
  // '1e+21', which a child process cannot read back): reject them as the number path does.
  if (!Number.isSafeInteger(bytes)) throw new InvalidArgumentError(`${what}: ${JSON.stringify(input)} is too large`);
  return bytes;
}

export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  // Move up a unit once the value would *print* as 1024.0 (1023.95 and above), so
  // 1048575 bytes reads '1.0 MiB' rather than '1024.0 KiB'. Whole bytes print exactly.
  while (Math.abs(value) >= (unit === 0 ? 1024 : 1023.95) && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

/**
 * A byte-size option as given: a string ('64 MiB') parsed to bytes, a number or undefined
 * passed on unchanged for the option's own checks and default.
 */
export function byteOption<T>(input: number | string | T, what: string): number | T {
  return typeof input === 'string' ? parseBytes(input, what) : input;
}

/** An options type whose byte-size options `K` have been parsed to numbers. */
export type WithByteOptions<T, K extends keyof T> = Omit<T, K> & { [P in K]?: number };

/** A copy of `options` with the byte-size options `names` parsed (see byteOption). */
export function withByteOptions<T extends object, K extends keyof T>(options: T, names: readonly K[]): WithByteOptions<T, K> {
  const parsed: Record<PropertyKey, unknown> = { ...(options as Record<PropertyKey, unknown>) };
  for (const name of names) {
    const value = parsed[name];
    if (typeof value === 'string') parsed[name] = parseBytes(value, String(name));
  }
  return parsed as WithByteOptions<T, K>;
}
