import { InvalidArgumentError } from './errors.js';

const UNITS: Record<string, number> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
  k: 2 ** 10,
  m: 2 ** 20,
  g: 2 ** 30,
  t: 2 ** 40,
};

/** Bytes from a number or a string such as '512 MiB', '1.5GB', '256mib', '4096'. */
export function parseBytes(input: number | string, what = 'size'): number {
  if (typeof input === 'number') {
    if (!Number.isFinite(input) || input < 0) throw new InvalidArgumentError(`${what} must be a non-negative number of bytes, got ${input}`);
    return Math.floor(input);
  }
  if (typeof input !== 'string') throw new InvalidArgumentError(`${what} must be a number or a string like '512 MiB'`);
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(input);
  const factor = match === null ? undefined : UNITS[(match[2] || 'b').toLowerCase()];
  if (match === null || factor === undefined) {
    throw new InvalidArgumentError(`${what}: cannot read ${JSON.stringify(input)} as a size (examples: 4096, '512 MiB', '2GB')`);
  }
  return Math.floor(Number(match[1]) * factor);
}

export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}
