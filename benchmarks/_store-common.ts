/** What the store benchmark's phases share (files starting with `_` are not benchmarks of their own). */
export const MiB = 1024 * 1024;
export const GiB = 1024 * MiB;

export interface Row {
  name: string;
  reference: string;
  measured: string;
  ratio: string;
  target: string;
  pass: boolean;
}
export const rows: Row[] = [];

export const gc = (): void => (globalThis as { gc?: () => void }).gc?.();
export const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
export const gbps = (bytes: number, ms: number): number => bytes / 1e9 / (ms / 1000);
export const fmt = (x: number, digits = 2): string => x.toFixed(digits);

/** Fills `a` with a pattern unique to (seed, index), in slices, yielding between them. */
export async function fill(a: Float64Array, seed: number, sliceElems = 128 * 1024): Promise<void> {
  for (let from = 0; from < a.length; from += sliceElems) {
    const to = Math.min(a.length, from + sliceElems);
    for (let i = from; i < to; i++) a[i] = seed * 1e9 + i;
    await tick();
  }
}

/** Count of elements that differ from fill()'s pattern (checks in slices). */
export async function mismatches(a: Float64Array, seed: number, sliceElems = 512 * 1024): Promise<number> {
  let bad = 0;
  for (let from = 0; from < a.length; from += sliceElems) {
    const to = Math.min(a.length, from + sliceElems);
    for (let i = from; i < to; i++) if (a[i] !== seed * 1e9 + i) bad++;
    await tick();
  }
  return bad;
}

