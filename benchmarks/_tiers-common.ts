/** What the tiers benchmark's phases share (files starting with `_` are not benchmarks of their own). */
import { performance } from 'node:perf_hooks';
import type { Tier, WriteSource } from '../src/tiers/index.js';

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

/** The middle value (the lower of the two middle ones for an even count). */
export function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

/** A rounded random walk (2 decimals) as Float64 bytes: compressible numbers. */
export function randomWalkBytes(bytes: number, seed: number): Buffer {
  const a = new Float64Array(bytes / 8);
  let x = 0;
  let s = seed;
  for (let i = 0; i < a.length; i++) {
    s = (s * 1103515245 + 12345) % 2147483648;
    x += s / 2147483648 - 0.5;
    a[i] = Math.round(x * 100) / 100;
  }
  return Buffer.from(a.buffer);
}

export interface Run {
  writeMs: number;
  readMs: number;
  bytes: number;
  stored: number;
}

/** Writes value i under id i, `perCall` values per writeMany call, one call at a time (as the store hands batches over). */
async function writeInBatches(tier: Tier, values: Uint8Array[], perCall: number): Promise<void> {
  if (tier.writeMany === undefined) throw new Error(`tier ${tier.name} has no writeMany`);
  for (let from = 0; from < values.length; from += perCall) {
    const items = values.slice(from, from + perCall).map((bytes, k) => ({ id: from + k, bytes: [bytes], byteLength: bytes.byteLength }));
    const failed = (await tier.writeMany(items)).find((r) => r.status === 'rejected');
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
  }
}

/**
 * Writes then reads every value, `concurrency` calls at a time; with `perCall`, writes go
 * through writeMany instead, that many values per call.
 */
export async function writeRead(
  tier: Tier,
  values: Uint8Array[],
  source: (b: Uint8Array) => WriteSource,
  concurrency: number,
  collect = true,
  perCall?: number,
): Promise<Run> {
  await tier.open();
  try {
    const total = values.reduce((s, v) => s + v.byteLength, 0);
    // A forced full GC inside an event-loop measurement would be measured too.
    if (collect) gc();
    let t = performance.now();
    if (perCall !== undefined) await writeInBatches(tier, values, perCall);
    else await pool(values.length, concurrency, (i) => tier.write(i, source(values[i]), values[i].byteLength));
    const writeMs = performance.now() - t;
    const stored = tier.usage().bytes;
    t = performance.now();
    let check = 0;
    await pool(values.length, concurrency, async (i) => {
      const back = await tier.read(i);
      check += back.byteLength;
    });
    const readMs = performance.now() - t;
    if (check !== total) throw new Error(`read back ${check} of ${total} bytes`);
    return { writeMs, readMs, bytes: total, stored };
  } finally {
    await tier.close();
  }
}
