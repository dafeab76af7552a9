/**
 * XXH64 (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md) in portable
 * TypeScript, with BigInt arithmetic: the reference the native binding is tested against,
 * and the fallback where no native binding loads (correct, ~100x slower).
 */

const MASK = 0xffff_ffff_ffff_ffffn;
const P1 = 0x9e3779b185ebca87n;
const P2 = 0xc2b2ae3d27d4eb4fn;
const P3 = 0x165667b19e3779f9n;
const P4 = 0x85ebca77c2b2ae63n;
const P5 = 0x27d4eb2f165667c5n;

function rotl(x: bigint, r: bigint): bigint {
  return ((x << r) | (x >> (64n - r))) & MASK;
}

function round(acc: bigint, lane: bigint): bigint {
  return (rotl((acc + lane * P2) & MASK, 31n) * P1) & MASK;
}

function merge(acc: bigint, lane: bigint): bigint {
  return (((acc ^ round(0n, lane)) * P1) & MASK) + P4 & MASK;
}

function u64(bytes: Uint8Array, at: number): bigint {
  return BigInt(u32(bytes, at)) | (BigInt(u32(bytes, at + 4)) << 32n);
}

function u32(bytes: Uint8Array, at: number): number {
  return (bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16) | (bytes[at + 3] << 24)) >>> 0;
}

/** Streaming XXH64: the same digest whatever the pieces `update` is given. */
export class Xxh64Portable {
  #v1: bigint;
  #v2: bigint;
  #v3: bigint;
  #v4: bigint;
  #total = 0;
  readonly #stripe = new Uint8Array(32);
  #buffered = 0;

  constructor(private readonly seed: bigint = 0n) {
    seed &= MASK;
    this.#v1 = (seed + P1 + P2) & MASK;
    this.#v2 = (seed + P2) & MASK;
    this.#v3 = seed;
    this.#v4 = (seed - P1) & MASK;
  }

  update(bytes: Uint8Array): this {
    this.#total += bytes.byteLength;
    let at = 0;
    if (this.#buffered > 0) {
      const take = Math.min(32 - this.#buffered, bytes.byteLength);
      this.#stripe.set(bytes.subarray(0, take), this.#buffered);
      this.#buffered += take;
      at = take;
      if (this.#buffered < 32) return this;
      this.#consume(this.#stripe, 0);
      this.#buffered = 0;
    }
    for (; at + 32 <= bytes.byteLength; at += 32) this.#consume(bytes, at);
    this.#stripe.set(bytes.subarray(at), 0);
    this.#buffered = bytes.byteLength - at;
    return this;
  }

  digest(): bigint {
    let h: bigint;
    if (this.#total >= 32) {
      h = (rotl(this.#v1, 1n) + rotl(this.#v2, 7n) + rotl(this.#v3, 12n) + rotl(this.#v4, 18n)) & MASK;
      h = merge(merge(merge(merge(h, this.#v1), this.#v2), this.#v3), this.#v4);
    } else {
      h = (this.seed + P5) & MASK;
    }
    h = (h + BigInt(this.#total)) & MASK;
    const rest = this.#stripe;
    let at = 0;
    for (; at + 8 <= this.#buffered; at += 8) h = ((rotl(h ^ round(0n, u64(rest, at)), 27n) * P1) & MASK) + P4 & MASK;
    if (at + 4 <= this.#buffered) {
      h = ((rotl(h ^ ((BigInt(u32(rest, at)) * P1) & MASK), 23n) * P2) & MASK) + P3 & MASK;
      at += 4;
    }
    for (; at < this.#buffered; at++) h = (rotl(h ^ ((BigInt(rest[at]) * P5) & MASK), 11n) * P1) & MASK;
    h ^= h >> 33n;
    h = (h * P2) & MASK;
    h ^= h >> 29n;
    h = (h * P3) & MASK;
    return h ^ (h >> 32n);
  }

  #consume(bytes: Uint8Array, at: number): void {
    this.#v1 = round(this.#v1, u64(bytes, at));
    this.#v2 = round(this.#v2, u64(bytes, at + 8));
    this.#v3 = round(this.#v3, u64(bytes, at + 16));
    this.#v4 = round(this.#v4, u64(bytes, at + 24));
  }
}

/** One-shot portable XXH64. */
export function xxh64Portable(bytes: Uint8Array, seed = 0n): bigint {
  return new Xxh64Portable(seed).update(bytes).digest();
}
