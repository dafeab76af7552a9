/**
 * A binary value written from the pieces it is made of, without laying them out in one
 * buffer first.
 */
import { binaryTag } from './binary.js';
import { CHECKSUM_SLICE_BYTES } from './checksum.js';
import { batchesOf, checkEncodedLength, ZERO_PAD } from './encode.js';
import { HeaderKind, bodyStart, layoutOf, writePrefix } from './format.js';

/** A Uint8Array, for its binary tag and its name in errors. */
const EMPTY_BYTES = new Uint8Array(0);

/** The encoded length of a Uint8Array of `bytes`: what `gatheredBatches` writes for pieces of `bytes` in all. */
export function gatheredByteLength(bytes: number): number {
  return layoutOf(HeaderKind.Binary, 1, [bytes]).totalLength;
}

/**
 * The batches `encodedBatches` yields for a Uint8Array whose bytes are `views` laid end to
 * end, without laying them out in one buffer: the bytes a shuffle's chunk gathers from the
 * pieces it received are written from where they arrived. Decoded, the value is that
 * Uint8Array. Views longer together than one value may be are refused with a CodecError
 * before the first batch.
 */
export async function* gatheredBatches(views: readonly Uint8Array[], batchBytes = CHECKSUM_SLICE_BYTES): AsyncGenerator<Uint8Array[], void, undefined> {
  let length = 0;
  for (const view of views) length += view.byteLength;
  const layout = layoutOf(HeaderKind.Binary, 1, [length]);
  checkEncodedLength(layout, EMPTY_BYTES);
  // Zero-filled: the header's padding must be zeros.
  const prefix = Buffer.alloc(bodyStart(layout));
  writePrefix(prefix, 0, layout, Uint8Array.of(binaryTag(EMPTY_BYTES)));
  function* gathered(): Generator<Uint8Array> {
    yield prefix;
    for (const view of views) if (view.byteLength > 0) yield view;
    const pad = (8 - (length % 8)) % 8;
    if (pad > 0) yield ZERO_PAD.subarray(0, pad);
  }
  yield* batchesOf(gathered(), layout.trailerOffset, batchBytes);
}
