/**
 * The checksum of an encoded value (docs/protocol.md#checksum): XXH64 of its prefix (the
 * bytes before the first frame, or before the trailer when it has none), then XXH64 of the
 * rest before the trailer (the body) seeded with the prefix's digest. Two parts, because a
 * batch of small values lays each prefix out in a side buffer while the frame stays in the
 * value's own memory: one native call hashes a value's frame, seeded with the digest of a
 * prefix every value of that type and length shares (computed once).
 *
 * Why XXH64 and not CRC-32C (format version 1): the native XXH64 hashes a small value in
 * about half the time of the native CRC-32C binding, which shows on the main thread when
 * many small values spill; and 64 bits catch more corruption.
 */
import { yieldToLoop } from '../loop.js';
import { loadXxh64, type Xxh64Binding, type Xxh64Stream } from '../native.js';
import { FIXED_PREFIX_BYTES, bodyOffset } from './format.js';
import { Xxh64Portable, xxh64Portable } from './xxh64.js';

/** Bytes hashed per synchronous step when a caller wants to yield in between. */
export const CHECKSUM_SLICE_BYTES = 4 * 1024 * 1024;

let native: Xxh64Binding | null | undefined;

/**
 * The native XXH64, loaded on the first checksum; null when it is missing, disagrees with
 * the reference, or SPILLWAY_CHECKSUM=portable asks for the fallback (to check it;
 * docs/protocol.md#checksum).
 */
function nativeBinding(): Xxh64Binding | null {
  if (native !== undefined) return native;
  const mod = process.env.SPILLWAY_CHECKSUM === 'portable' ? undefined : loadXxh64();
  // Guard against a binding that loads but disagrees with the reference.
  const probe = Uint8Array.from({ length: 67 }, (_, i) => i * 7);
  const agrees = mod !== undefined && mod.xxh64(probe, 5n) === xxh64Portable(probe, 5n) && new mod.Xxh64(5n).update(probe).digest() === xxh64Portable(probe, 5n);
  native = agrees ? mod : null;
  return native;
}

/** True when the fast native XXH64 is in use (else a portable one computes the same, far slower). */
export function nativeChecksum(): boolean {
  return nativeBinding() !== null;
}

/** One-shot XXH64 of `bytes` with `seed`. */
export function xxh64(bytes: Uint8Array, seed: bigint): bigint {
  const binding = native ?? nativeBinding();
  return binding !== null ? binding.xxh64(bytes, seed) : xxh64Portable(bytes, seed);
}

/** Streaming XXH64 with `seed`: the digest of everything given to `update`. */
function newXxh64(seed: bigint): Xxh64Stream {
  const binding = native ?? nativeBinding();
  return binding !== null ? new binding.Xxh64(seed) : new Xxh64Portable(seed);
}

const EMPTY = new Uint8Array(0);

/** Where the body starts, from a value's 16 fixed bytes (its frame count and header length). */
function bodyStartOf(fixed: Uint8Array): number {
  const view = new DataView(fixed.buffer, fixed.byteOffset, FIXED_PREFIX_BYTES);
  return bodyOffset(view.getUint32(12, true), view.getUint32(8, true));
}

const PREFIX = 0;
const BODY = 1;

/**
 * The checksum of a value's first `hashedBytes` bytes (its trailer's offset), fed in any
 * pieces: bytes past `hashedBytes` are ignored, so a reader can pass whole chunks. It learns
 * where the body starts from the first 16 bytes. Bytes that are not a value still get a
 * digest (one no correct trailer matches, in practice); the layout check rejects them.
 */
export class ValueHasher {
  #position = 0;
  #state = PREFIX;
  /** Where the body starts, once the first 16 bytes are known. */
  #bodyStart = -1;
  /** The first bytes, while fewer than 16 have come. */
  #head: Uint8Array | undefined;
  /** The finished part's digest: the body's seed. */
  #seed = 0n;
  /** The body was hashed in one call: `#seed` is its digest. */
  #bodyDone = false;
  /** The current part, when it comes in more than one piece. */
  #stream: Xxh64Stream | undefined;

  constructor(readonly hashedBytes: number) {}

  update(bytes: Uint8Array): this {
    const n = Math.min(bytes.byteLength, this.hashedBytes - this.#position);
    let at = 0;
    while (at < n) {
      if (this.#bodyStart < 0) {
        if (this.#position === 0 && n >= FIXED_PREFIX_BYTES) {
          this.#bodyStart = bodyStartOf(bytes);
        } else {
          const take = Math.min(n - at, FIXED_PREFIX_BYTES - this.#position);
          (this.#head ??= new Uint8Array(FIXED_PREFIX_BYTES)).set(bytes.subarray(at, at + take), this.#position);
          this.#feed(bytes.subarray(at, at + take), -1);
          at += take;
          if (this.#position === FIXED_PREFIX_BYTES) {
            this.#bodyStart = bodyStartOf(this.#head);
            this.#head = undefined;
            if (this.#bodyStart === this.#position) this.#endPrefix();
          }
          continue;
        }
      }
      const start = this.#state === PREFIX ? 0 : this.#bodyStart;
      const end = this.#state === PREFIX ? this.#bodyStart : this.hashedBytes;
      const take = Math.min(n - at, end - this.#position);
      this.#feed(take === bytes.byteLength ? bytes : bytes.subarray(at, at + take), this.#position === start && this.#position + take === end ? end : -1);
      at += take;
      if (this.#state === PREFIX && this.#position === this.#bodyStart) this.#endPrefix();
    }
    return this;
  }

  /** The checksum of the bytes given so far. */
  digest(): bigint {
    if (this.#state === PREFIX) return xxh64(EMPTY, this.#stream?.digest() ?? xxh64(EMPTY, 0n));
    if (this.#stream !== undefined) return this.#stream.digest();
    return this.#bodyDone ? this.#seed : xxh64(EMPTY, this.#seed);
  }

  /** Hashes `piece`; `wholePart` is the part's end when the piece is all of it (one native call, no stream). */
  #feed(piece: Uint8Array, wholePart: number): void {
    if (wholePart >= 0 && this.#stream === undefined) {
      this.#seed = xxh64(piece, this.#seed);
      this.#position += piece.byteLength;
      this.#bodyDone = this.#state === BODY;
      return;
    }
    (this.#stream ??= newXxh64(this.#seed)).update(piece);
    this.#position += piece.byteLength;
  }

  #endPrefix(): void {
    if (this.#stream !== undefined) {
      this.#seed = this.#stream.digest();
      this.#stream = undefined;
    }
    this.#state = BODY;
  }
}

/** The checksum of a value's first `hashedBytes` bytes, yielding to the event loop between slices. */
export async function checksumChunked(bytes: Uint8Array, hashedBytes: number, sliceBytes = CHECKSUM_SLICE_BYTES): Promise<bigint> {
  const hasher = new ValueHasher(hashedBytes);
  for (let offset = 0; offset < hashedBytes; offset += sliceBytes) {
    if (offset > 0) await yieldToLoop();
    hasher.update(bytes.subarray(offset, Math.min(offset + sliceBytes, hashedBytes)));
  }
  return hasher.digest();
}
