/**
 * Write sources and checks for testing a tier: encoded values, raw bytes in batches, a
 * source that fails midway or trickles, incompressible and compressible data, and what a
 * tier left on disk.
 */
import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { encode, encodedBatches, encodeToBuffer } from '../codec/index.js';
import type { WriteSource } from '../tiers/tier.js';
import { OWNER_FILE } from '../folders/owner.js';

/** A real write source: an encoded value, in batches of `batchBytes`. */
export async function encodedSource(value: unknown, batchBytes = 256 * 1024): Promise<{ source: WriteSource; bytes: Buffer }> {
  const bytes = await encodeToBuffer(value);
  return { source: encodedBatches(encode(value), batchBytes), bytes };
}

/** Yields `bytes` as views in batches of `pieceBytes`, two pieces per batch. */
export async function* rawSource(bytes: Uint8Array, pieceBytes = 64 * 1024): AsyncGenerator<Uint8Array[]> {
  for (let offset = 0; offset < bytes.byteLength; offset += 2 * pieceBytes) {
    const batch = [bytes.subarray(offset, Math.min(offset + pieceBytes, bytes.byteLength))];
    if (offset + pieceBytes < bytes.byteLength) batch.push(bytes.subarray(offset + pieceBytes, Math.min(offset + 2 * pieceBytes, bytes.byteLength)));
    yield batch;
  }
}

/** Yields `failAfter` bytes of `bytes`, then throws, as a producer failing midway would. */
export async function* failingSource(bytes: Uint8Array, failAfter: number): AsyncGenerator<Uint8Array[]> {
  for await (const batch of rawSource(bytes.subarray(0, failAfter), 4096)) yield batch;
  throw new Error('source failed midway');
}

/** Yields the bytes slowly, one small batch per timer tick. */
export async function* slowSource(bytes: Uint8Array, pieces = 20): AsyncGenerator<Uint8Array[]> {
  const step = Math.ceil(bytes.byteLength / pieces);
  for (let offset = 0; offset < bytes.byteLength; offset += step) {
    await new Promise((resolve) => setTimeout(resolve, 2));
    yield [bytes.subarray(offset, offset + step)];
  }
}

/** A rounded random walk: the compressible numeric data of the benchmarks. */
export function randomWalk(count: number, seed = 1): Float64Array {
  const out = new Float64Array(count);
  let x = 0;
  let s = seed;
  for (let i = 0; i < count; i++) {
    s = (s * 1103515245 + 12345) % 2147483648;
    x += s / 2147483648 - 0.5;
    out[i] = Math.round(x * 100) / 100;
  }
  return out;
}

/** Deterministic-length random bytes (incompressible). */
export function noise(length: number): Buffer {
  return randomBytes(length);
}

export async function collect(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(Buffer.from(part as Uint8Array));
  return Buffer.concat(parts);
}

/** Every file (not directory) under `dirs`, with its size; owner files left out. */
export async function filesUnder(dirs: readonly string[]): Promise<{ path: string; size: number }[]> {
  const out: { path: string; size: number }[] = [];
  for (const dir of dirs) {
    const entries = await fsp.readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      // The owner file says whose folder it is (docs/configuration.md, "Spill folders"): not a stored byte.
      if (!e.isFile() || e.name === OWNER_FILE) continue;
      const p = path.join(e.parentPath ?? e.path, e.name);
      const st = await fsp.stat(p).catch(() => undefined);
      if (st !== undefined) out.push({ path: p, size: st.size });
    }
  }
  return out;
}

/** Every entry (files and folders) directly or indirectly under `dirs`. */
export async function entriesUnder(dirs: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const dir of dirs) {
    const names = await fsp.readdir(dir, { recursive: true }).catch(() => []);
    out.push(...names.map((n) => path.join(dir, n)));
  }
  return out;
}
