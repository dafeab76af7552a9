/**
 * A shuffle piece on the wire and in a worker's store is a record: a 24-byte header
 * (output, input, part, parts, length, reserved; u32 little-endian) then `length` bytes
 * of the piece in the codec format (or one part of them, for a piece larger than a
 * frame), padded to 8 bytes so that the next record, and the piece's frames, stay aligned.
 * Records of many pieces are concatenated: a push frame, a chunk of one output in the store.
 */
import { ShuffleIncompleteError } from './errors.js';

export const RECORD_HEADER_BYTES = 24;

export interface RecordHeader {
  output: number;
  input: number;
  part: number;
  parts: number;
  length: number;
}

export interface ParsedRecord extends RecordHeader {
  /** The whole record, header and padding included. */
  record: Uint8Array;
  payload: Uint8Array;
}

/** Bytes a record of `payloadBytes` takes, padding included. */
export function recordLength(payloadBytes: number): number {
  return RECORD_HEADER_BYTES + payloadBytes + ((8 - (payloadBytes % 8)) % 8);
}

export function writeRecordHeader(out: Uint8Array, offset: number, header: RecordHeader): void {
  const view = new DataView(out.buffer, out.byteOffset + offset, RECORD_HEADER_BYTES);
  view.setUint32(0, header.output, true);
  view.setUint32(4, header.input, true);
  view.setUint32(8, header.part, true);
  view.setUint32(12, header.parts, true);
  view.setUint32(16, header.length, true);
  view.setUint32(20, 0, true);
}

/** The records of a buffer of concatenated records; throws ShuffleIncompleteError on bytes that are not records. */
export function* parseRecords(bytes: Uint8Array): Generator<ParsedRecord> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  while (at < bytes.byteLength) {
    if (at + RECORD_HEADER_BYTES > bytes.byteLength) throw new ShuffleIncompleteError(`a truncated shuffle record (${bytes.byteLength - at} bytes left)`);
    const output = view.getUint32(at, true);
    const input = view.getUint32(at + 4, true);
    const part = view.getUint32(at + 8, true);
    const parts = view.getUint32(at + 12, true);
    const length = view.getUint32(at + 16, true);
    const total = recordLength(length);
    if (at + total > bytes.byteLength || parts === 0 || part >= parts) throw new ShuffleIncompleteError('a malformed shuffle record');
    yield {
      output,
      input,
      part,
      parts,
      length,
      record: bytes.subarray(at, at + total),
      payload: bytes.subarray(at + RECORD_HEADER_BYTES, at + RECORD_HEADER_BYTES + length),
    };
    at += total;
  }
}

export interface RecordViews {
  output: number;
  /** The whole record, header and padding included, as views of the parts it spans. */
  views: Uint8Array[];
  bytes: number;
}

/**
 * The records of the concatenation of `parts` (a push as its socket reads delivered it),
 * each as views of the parts it spans: nothing is copied but a header that straddles two
 * parts. Throws ShuffleIncompleteError on bytes that are not records.
 */
export function* parseRecordViews(parts: readonly Uint8Array[]): Generator<RecordViews> {
  const scratch = new Uint8Array(RECORD_HEADER_BYTES);
  const scratchView = new DataView(scratch.buffer);
  let index = 0;
  let offset = 0;
  let left = parts.reduce((sum, p) => sum + p.byteLength, 0);
  const take = (n: number, into: Uint8Array[]): void => {
    while (n > 0) {
      const part = parts[index];
      const step = Math.min(n, part.byteLength - offset);
      into.push(part.subarray(offset, offset + step));
      offset += step;
      n -= step;
      if (offset === part.byteLength) {
        index++;
        offset = 0;
      }
    }
  };
  while (left > 0) {
    while (offset === parts[index].byteLength) {
      index++;
      offset = 0;
    }
    if (left < RECORD_HEADER_BYTES) throw new ShuffleIncompleteError(`a truncated shuffle record (${left} bytes left)`);
    const part = parts[index];
    let view: DataView;
    let at: number;
    if (part.byteLength - offset >= RECORD_HEADER_BYTES) {
      view = new DataView(part.buffer, part.byteOffset, part.byteLength);
      at = offset;
    } else {
      // The header straddles parts: read it from a copy.
      let filled = 0;
      for (let i = index, o = offset; filled < RECORD_HEADER_BYTES; i++, o = 0) {
        const piece = parts[i].subarray(o, o + RECORD_HEADER_BYTES - filled);
        scratch.set(piece, filled);
        filled += piece.byteLength;
      }
      view = scratchView;
      at = 0;
    }
    const output = view.getUint32(at, true);
    const recordParts = view.getUint32(at + 12, true);
    const part_ = view.getUint32(at + 8, true);
    const total = recordLength(view.getUint32(at + 16, true));
    if (total > left || recordParts === 0 || part_ >= recordParts) throw new ShuffleIncompleteError('a malformed shuffle record');
    const views: Uint8Array[] = [];
    take(total, views);
    left -= total;
    yield { output, views, bytes: total };
  }
}
