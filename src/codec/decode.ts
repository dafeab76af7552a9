import { ChecksumError, FormatError, TypeDecodeError, UnknownTypeError, errorMessage } from '../errors.js';
import { restoreBinary } from './binary.js';
import { checksumChunked } from './checksum.js';
import { HeaderKind, type Layout, parseLayout, readChecksum } from './format.js';
import { unpackHeader } from './msgpack.js';
import { deserializeV8 } from './v8-typed.js';

/** Parses and bounds-checks the layout of a complete encoded value. */
export function layoutOfBytes(bytes: Uint8Array): Layout {
  const layout = parseLayout(bytes, bytes.byteLength);
  if (typeof layout === 'number') throw new FormatError(`truncated value: ${bytes.byteLength} bytes, need ${layout}`);
  if (bytes.byteLength !== layout.totalLength) {
    throw new FormatError(`value length ${bytes.byteLength} does not match its layout (${layout.totalLength})`);
  }
  return layout;
}

/** Throws ChecksumError unless `checksum` (of the bytes before the trailer) matches the trailer. */
export function checkChecksum(bytes: Uint8Array, layout: Layout, checksum: bigint, where?: string): void {
  const expected = readChecksum(bytes, layout.trailerOffset);
  if (expected !== checksum) throw new ChecksumError(expected, checksum, where);
}

/**
 * Rebuilds the value; binary frames and buffers of registered types become views over
 * `bytes` (no copy), a v8 value's SharedArrayBuffers new SharedArrayBuffers (a copy each).
 * The checksum must already have been checked (see decodeVerified, or a streaming reader's
 * hash).
 */
export function decodeBody(bytes: Uint8Array, layout: Layout): unknown {
  const frames = layout.frameOffsets.map((offset, i) => bytes.subarray(offset, offset + layout.frameLengths[i]));
  const header = bytes.subarray(layout.headerOffset, layout.headerOffset + layout.headerLength);
  try {
    switch (layout.headerKind) {
      case HeaderKind.Binary:
        return restoreBinary(header[0], frames[0]);
      case HeaderKind.Msgpack:
        return unpackHeader(header, frames);
      case HeaderKind.V8:
        return deserializeV8(header, frames);
    }
  } catch (err) {
    // A registered type's own failures keep their type and code: the bytes are Spillway's.
    if (err instanceof UnknownTypeError || err instanceof TypeDecodeError) throw err;
    throw new FormatError(`cannot decode value: ${errorMessage(err)}`);
  }
}

/** Verifies the checksum (yielding to the loop every few MiB) and decodes. */
export async function decodeVerified(bytes: Uint8Array, where?: string): Promise<unknown> {
  const layout = layoutOfBytes(bytes);
  checkChecksum(bytes, layout, await checksumChunked(bytes, layout.trailerOffset), where);
  return decodeBody(bytes, layout);
}
