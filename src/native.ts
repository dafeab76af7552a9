/**
 * The native bindings, loaded on first use rather than at import: importing Spillway then
 * works where a binding is missing, and only the feature that needs it fails, with a
 * NativeModuleError. They are CommonJS packages, so `require` loads them synchronously.
 */
import { createRequire } from 'node:module';
import { NativeModuleError } from './errors.js';

export interface Lz4Binding {
  compress(data: Buffer | Uint8Array): Promise<Buffer>;
  compressSync(data: Buffer | Uint8Array): Buffer;
  uncompress(data: Buffer | Uint8Array): Promise<Buffer>;
  uncompressSync(data: Buffer | Uint8Array): Buffer;
}

export interface Xxh64Stream {
  update(bytes: Uint8Array): Xxh64Stream;
  digest(): bigint;
}

export interface Xxh64Binding {
  xxh64(input: Uint8Array, seed?: bigint | null): bigint;
  Xxh64: new (seed?: bigint | null) => Xxh64Stream;
}

let requireHere: NodeJS.Require | undefined;

/** `require` relative to this module, created on the first load. */
export function localRequire(): NodeJS.Require {
  return (requireHere ??= createRequire(import.meta.url));
}

let lz4Binding: Lz4Binding | undefined;

/** lz4-napi; throws NativeModuleError when it cannot be loaded (nothing else compresses). */
export function lz4(): Lz4Binding {
  if (lz4Binding !== undefined) return lz4Binding;
  try {
    lz4Binding = localRequire()('lz4-napi') as Lz4Binding;
  } catch (err) {
    throw new NativeModuleError('lz4-napi', err);
  }
  return lz4Binding;
}

/** @node-rs/xxhash, or undefined when it cannot be loaded (a portable XXH64 stands in). */
export function loadXxh64(): Xxh64Binding | undefined {
  try {
    return localRequire()('@node-rs/xxhash') as Xxh64Binding;
  } catch {
    return undefined;
  }
}
