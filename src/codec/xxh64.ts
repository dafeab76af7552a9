/**
 * XXH64 (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md) in portable
 * TypeScript: the fallback where no native binding loads, and a second implementation the
 * native one is tested against. 64-bit words are pairs of 32-bit halves (hi, lo): BigInt
 * arithmetic is more than an order of magnitude slower.
 */

// The primes, as hi and lo halves.
const P1H = 0x9e3779b1 | 0;
const P1L = 0x85ebca87 | 0;
const P2H = 0xc2b2ae3d | 0;
const P2L = 0x27d4eb4f | 0;
const P3H = 0x165667b1 | 0;
const P3L = 0x9e3779f9 | 0;
const P4H = 0x85ebca77 | 0;
const P4L = 0xc2b2ae63 | 0;
const P5H = 0x27d4eb2f | 0;
const P5L = 0x165667c5 | 0;

// The result of the last mul/add/round (hi, lo), in a typed array rather than an object per
// operation or two module variables (those would hold boxed doubles, much slower). Halves are
// signed int32 (`| 0`) throughout.
const R = new Int32Array(2);

/** (ah, al) * (bh, bl) mod 2^64 into R[0], R[1]. */
function mul(ah: number, al: number, bh: number, bl: number): void {
  // al * bl exactly, from 16-bit halves (each partial product fits a double).
  const a0 = al & 0xffff;
  const a1 = al >>> 16;
  const b0 = bl & 0xffff;
  const b1 = bl >>> 16;
  const p00 = a0 * b0;
  const p01 = a0 * b1;
  const p10 = a1 * b0;
  const mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  const carry = a1 * b1 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16);
  R[1] = ((mid & 0xffff) << 16) | (p00 & 0xffff);
  R[0] = (carry + Math.imul(ah, bl) + Math.imul(al, bh)) | 0;
}

/** (ah, al) + (bh, bl) mod 2^64 into R[0], R[1]. */
function add(ah: number, al: number, bh: number, bl: number): void {
  const lo = (al >>> 0) + (bl >>> 0);
  R[1] = lo | 0;
  R[0] = (ah + bh + (lo > 0xffffffff ? 1 : 0)) | 0;
}

/** rotl((h, l), r) for 0 < r < 32, into R[0], R[1]. */
function rotl(h: number, l: number, r: number): void {
  R[0] = (h << r) | (l >>> (32 - r));
  R[1] = (l << r) | (h >>> (32 - r));
}

/** XXH64's round: rotl(acc + lane * P2, 31) * P1, into R[0], R[1]. */
function round(ah: number, al: number, lh: number, ll: number): void {
  mul(lh, ll, P2H, P2L);
  add(ah, al, R[0], R[1]);
  rotl(R[0], R[1], 31);
  mul(R[0], R[1], P1H, P1L);
}

function u32(bytes: Uint8Array, at: number): number {
  return bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16) | (bytes[at + 3] << 24);
}

/**
 * Runs the 32-byte stripes of bytes[at, end) through the four accumulators in `v`
 * (v1h, v1l ... v4h, v4l); `end - at` is a multiple of 32.
 */
function stripes(v: Int32Array, bytes: Uint8Array, at: number, end: number): void {
  let v1h = v[0], v1l = v[1], v2h = v[2], v2l = v[3], v3h = v[4], v3l = v[5], v4h = v[6], v4l = v[7];
  for (; at < end; at += 32) {
    round(v1h, v1l, u32(bytes, at + 4), u32(bytes, at));
    v1h = R[0];
    v1l = R[1];
    round(v2h, v2l, u32(bytes, at + 12), u32(bytes, at + 8));
    v2h = R[0];
    v2l = R[1];
    round(v3h, v3l, u32(bytes, at + 20), u32(bytes, at + 16));
    v3h = R[0];
    v3l = R[1];
    round(v4h, v4l, u32(bytes, at + 28), u32(bytes, at + 24));
    v4h = R[0];
    v4l = R[1];
  }
  v[0] = v1h;
  v[1] = v1l;
  v[2] = v2h;
  v[3] = v2l;
  v[4] = v3h;
  v[5] = v3l;
  v[6] = v4h;
  v[7] = v4l;
}

/** Streaming XXH64: the same digest whatever the pieces `update` is given. */
export class Xxh64Portable {
  /** The four accumulators, as hi/lo halves. */
  readonly #v = new Int32Array(8);
  readonly #seedH: number;
  readonly #seedL: number;
  #total = 0;
  readonly #stripe = new Uint8Array(32);
  #buffered = 0;

  constructor(seed = 0n) {
    const h = (this.#seedH = Number((seed >> 32n) & 0xffffffffn) | 0);
    const l = (this.#seedL = Number(seed & 0xffffffffn) | 0);
    const v = this.#v;
    add(h, l, P1H, P1L);
    add(R[0], R[1], P2H, P2L);
    v[0] = R[0];
    v[1] = R[1];
    add(h, l, P2H, P2L);
    v[2] = R[0];
    v[3] = R[1];
    v[4] = h;
    v[5] = l;
    // seed - P1: plus its two's complement.
    add(h, l, ~P1H, (~P1L + 1) | 0);
    v[6] = R[0];
    v[7] = R[1];
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
      stripes(this.#v, this.#stripe, 0, 32);
      this.#buffered = 0;
    }
    const end = at + Math.floor((bytes.byteLength - at) / 32) * 32;
    stripes(this.#v, bytes, at, end);
    this.#stripe.set(bytes.subarray(end), 0);
    this.#buffered = bytes.byteLength - end;
    return this;
  }

  digest(): bigint {
    let h: number, l: number;
    const v = this.#v;
    if (this.#total >= 32) {
      rotl(v[0], v[1], 1);
      let sh = R[0], sl = R[1];
      for (const [i, r] of [[2, 7], [4, 12], [6, 18]]) {
        rotl(v[i], v[i + 1], r);
        add(sh, sl, R[0], R[1]);
        sh = R[0];
        sl = R[1];
      }
      for (let i = 0; i < 8; i += 2) {
        // merge: acc = (acc ^ round(0, v)) * P1 + P4
        round(0, 0, v[i], v[i + 1]);
        mul(sh ^ R[0], sl ^ R[1], P1H, P1L);
        add(R[0], R[1], P4H, P4L);
        sh = R[0];
        sl = R[1];
      }
      h = sh;
      l = sl;
    } else {
      add(this.#seedH, this.#seedL, P5H, P5L);
      h = R[0];
      l = R[1];
    }
    add(h, l, Math.floor(this.#total / 0x1_0000_0000) | 0, this.#total | 0);
    h = R[0];
    l = R[1];
    const rest = this.#stripe;
    let at = 0;
    for (; at + 8 <= this.#buffered; at += 8) {
      round(0, 0, u32(rest, at + 4), u32(rest, at));
      rotl(h ^ R[0], l ^ R[1], 27);
      mul(R[0], R[1], P1H, P1L);
      add(R[0], R[1], P4H, P4L);
      h = R[0];
      l = R[1];
    }
    if (at + 4 <= this.#buffered) {
      mul(0, u32(rest, at), P1H, P1L);
      rotl(h ^ R[0], l ^ R[1], 23);
      mul(R[0], R[1], P2H, P2L);
      add(R[0], R[1], P3H, P3L);
      h = R[0];
      l = R[1];
      at += 4;
    }
    for (; at < this.#buffered; at++) {
      mul(0, rest[at], P5H, P5L);
      rotl(h ^ R[0], l ^ R[1], 11);
      mul(R[0], R[1], P1H, P1L);
      h = R[0];
      l = R[1];
    }
    // Avalanche: h ^= h >> 33; h *= P2; h ^= h >> 29; h *= P3; h ^= h >> 32.
    l ^= h >>> 1;
    mul(h, l, P2H, P2L);
    h = R[0] ^ (R[0] >>> 29);
    l = R[1] ^ ((R[1] >>> 29) | (R[0] << 3));
    mul(h, l, P3H, P3L);
    return (BigInt(R[0] >>> 0) << 32n) | BigInt((R[1] ^ R[0]) >>> 0);
  }
}

/** One-shot portable XXH64. */
export function xxh64Portable(bytes: Uint8Array, seed = 0n): bigint {
  return new Xxh64Portable(seed).update(bytes).digest();
}
