/** What the tiers benchmark's phases share (files starting with `_` are not benchmarks of their own). */
export const KiB = 1024;
export const MiB = 1024 * KiB;
export const mbps = (bytes: number, ms: number): number => bytes / 1e6 / (ms / 1000);
export const fmt = (x: number, digits = 2): string => x.toFixed(digits);
export const gc = (): void => (globalThis as { gc?: () => void }).gc?.();

export async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array[]> {
  yield [bytes];
}

/** In 4 MiB batches, as the encoder yields them. */
export async function* batches(bytes: Uint8Array): AsyncGenerator<Uint8Array[]> {
  for (let at = 0; at < bytes.byteLength; at += 4 * MiB) yield [bytes.subarray(at, at + 4 * MiB)];
}

/** A pause for the disk to finish what deleting 100,000 files left it to do, before the next phase. */
export const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 3000));

/** Runs `task(i)` for i < count with at most `limit` in flight (how a store spills a batch). */
export async function pool(count: number, limit: number, task: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, count) }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

