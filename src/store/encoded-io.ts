import { Readable } from 'node:stream';
import { FIXED_PREFIX_BYTES } from '../codec/format.js';
import { ValueHasher, encodedBatches, parseLayout, type Encoded } from '../codec/index.js';
import { ChecksumError, ClosedError, FormatError } from '../errors.js';
import type { WriteSource } from '../tiers/tier.js';

/** A stream of a value's encoded bytes, as stored and as sent to peers. */
export interface EncodedReadStream extends Readable {
  /** Total encoded length, known before the first byte. */
  readonly byteLength: number;
  /** 'memory' when encoded from the value in memory, else the tier it is read from. */
  readonly source: string;
}

export function asEncodedStream(stream: Readable, byteLength: number, source: string): EncodedReadStream {
  return Object.assign(stream, { byteLength, source });
}

/** A Readable over an in-memory value: pieces are views of its own memory, hashed on the way. */
export function memoryStream(encoded: Encoded): Readable {
  async function* pieces(): AsyncGenerator<Uint8Array> {
    for await (const batch of encodedBatches(encoded)) yield* batch;
  }
  // Object mode: each read hands out one piece as it is. A byte-mode Readable's async
  // iterator joins everything buffered with Buffer.concat, a copy of the value on the loop.
  return Readable.from(pieces(), { objectMode: true, highWaterMark: 4 });
}

/**
 * A write source over batches produced synchronously, adding the time each one takes to
 * produce (hashing) to `add`: timed around its own step only, never the microtasks of other
 * writes that run while this one awaits.
 */
export async function* timed(batches: Iterable<Uint8Array[]>, add: (seconds: number) => void): WriteSource {
  const iterator = batches[Symbol.iterator]();
  for (;;) {
    const start = performance.now();
    const next = iterator.next();
    add((performance.now() - start) / 1000);
    if (next.done === true) return;
    yield next.value;
  }
}

/**
 * Passes already-encoded bytes through to a tier while checking them: the layout must
 * describe exactly `byteLength` bytes, and the checksum of everything before the trailer must
 * match it. A mismatch throws inside the tier's write, so the tier stores nothing.
 */
export async function* verifiedSource(input: Uint8Array | WriteSource, byteLength: number): WriteSource {
  const trailerStart = byteLength - 8;
  if (trailerStart < 16) throw new FormatError(`an encoded value has at least 24 bytes, got ${byteLength}`);
  const hasher = new ValueHasher(trailerStart);
  const trailer = Buffer.alloc(8);
  // The first bytes, kept until they hold the whole frame table: parseLayout says how many
  // it needs (16, then 16 + 8F), bounded by byteLength and the format's limit of 2^20 frames.
  let prefixParts: Buffer[] | undefined = [];
  let prefixBytes = 0;
  let needed = FIXED_PREFIX_BYTES;
  let position = 0;
  const batches: WriteSource = input instanceof Uint8Array ? single(input) : input;
  for await (const batch of batches) {
    for (const piece of batch) {
      const end = position + piece.byteLength;
      if (end > byteLength) throw new FormatError(`encoded value is longer than the declared ${byteLength} bytes`);
      let used = 0;
      while (prefixParts !== undefined) {
        const take = Math.min(needed - prefixBytes, piece.byteLength - used);
        if (take > 0) {
          // A copy: the piece is passed on (and may be reused) before the frame table is complete.
          prefixParts.push(Buffer.from(piece.subarray(used, used + take)));
          prefixBytes += take;
          used += take;
        }
        if (prefixBytes < needed) break;
        const prefix = Buffer.concat(prefixParts, prefixBytes);
        prefixParts = [prefix];
        const layout = parseLayout(prefix, byteLength);
        if (typeof layout === 'number') {
          needed = layout;
          continue;
        }
        if (layout.totalLength !== byteLength) {
          throw new FormatError(`declared ${byteLength} bytes but the value's layout says ${layout.totalLength}`);
        }
        prefixParts = undefined;
      }
      // The hasher stops at the trailer by itself.
      if (position < trailerStart) hasher.update(piece);
      if (end > trailerStart) {
        const from = Math.max(position, trailerStart);
        trailer.set(piece.subarray(from - position), from - trailerStart);
      }
      position = end;
    }
    yield batch;
  }
  if (position !== byteLength) throw new FormatError(`encoded value ended after ${position} of ${byteLength} bytes`);
  if (prefixParts !== undefined) throw new FormatError('encoded value has no complete layout');
  const expected = trailer.readBigUInt64LE(0);
  const actual = hasher.digest();
  if (expected !== actual) throw new ChecksumError(expected, actual, 'received value');
}

async function* single(bytes: Uint8Array): WriteSource {
  // Cut into slices so one large buffer is hashed and written in overlapping steps.
  const slice = 4 * 1024 * 1024;
  for (let offset = 0; offset < bytes.byteLength; offset += slice) yield [bytes.subarray(offset, offset + slice)];
  if (bytes.byteLength === 0) throw new FormatError('empty encoded value');
}

/**
 * Passes a caller's source through until `signal` aborts (the store closes): then it
 * fails with ClosedError at once, even while the source is still waiting for its next
 * batch, so the tier's write fails (storing nothing) instead of holding close() up.
 */
export async function* abortable(source: WriteSource, signal: AbortSignal): WriteSource {
  const iterator = source[Symbol.asyncIterator]();
  let finished = false;
  try {
    for (;;) {
      if (signal.aborted) throw new ClosedError();
      const next = await new Promise<IteratorResult<readonly Uint8Array[]>>((resolve, reject) => {
        const onAbort = (): void => reject(new ClosedError());
        signal.addEventListener('abort', onAbort, { once: true });
        iterator.next().then(
          (result) => {
            signal.removeEventListener('abort', onAbort);
            resolve(result);
          },
          (err: unknown) => {
            signal.removeEventListener('abort', onAbort);
            reject(err);
          },
        );
      });
      if (next.done === true) {
        finished = true;
        return;
      }
      yield next.value;
    }
  } finally {
    // As `for await` would: tell the source it is no longer read. A source stuck in its
    // next batch cannot answer that before the batch comes, so it is not waited for then.
    if (!finished) {
      const ended = Promise.resolve(iterator.return?.()).catch(() => undefined);
      if (!signal.aborted) await ended;
    }
  }
}

export async function* streamSource(stream: Readable): WriteSource {
  for await (const chunk of stream) yield [chunk as Uint8Array];
}
