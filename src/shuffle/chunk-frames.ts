/**
 * A shuffle chunk's records in push frames, for a retiring worker's handover: frames end on
 * record boundaries and hold at most `frameBytes` (a larger record alone). A chunk in memory
 * is cut in place; a spilled one is streamed from its tier as the data server serves values
 * to peers, never read back into the store's memory: its encoded form is the value layout
 * around the raw records, so only the records are sent and the checksum is checked on the way.
 */
import { ChecksumError } from '../errors.js';
import { ValueHasher } from '../codec/checksum.js';
import { HeaderKind, type Layout, TRAILER_BYTES, parseLayout, readChecksum } from '../codec/format.js';
import type { SpillStore } from '../store/spill-store.js';
import { ShuffleIncompleteError } from './errors.js';
import { RECORD_HEADER_BYTES, parseRecords, recordLength } from './records.js';

/** The frames of the chunk stored under `key`, in order. */
export async function* chunkFrames(store: SpillStore, key: string, frameBytes: number): AsyncGenerator<Uint8Array> {
  if (store.where(key) === 'memory') {
    const lease = await store.acquire([key]);
    try {
      yield* recordFrames(lease.get(key) as Uint8Array, frameBytes);
    } finally {
      lease.release();
    }
    return;
  }
  // Pinned until the stream ends or is destroyed: the copy stays while it is read.
  const source = store.createReadStream(key);
  try {
    const cutter = new FrameCutter(frameBytes);
    for await (const piece of source as AsyncIterable<Uint8Array>) yield* cutter.take(piece);
    yield* cutter.end(key);
  } finally {
    source.destroy();
  }
}

/** A chunk's records in frames of at most `frameBytes` (a record larger than that alone in its frame). */
export function* recordFrames(chunk: Uint8Array, frameBytes: number): Generator<Uint8Array> {
  let start = 0;
  let end = 0;
  for (const { record } of parseRecords(chunk)) {
    const at = record.byteOffset - chunk.byteOffset;
    if (end > start && at + record.byteLength - start > frameBytes) {
      yield chunk.subarray(start, end);
      start = at;
    }
    end = at + record.byteLength;
  }
  if (end > start) yield chunk.subarray(start, end);
}

/**
 * Cuts a binary value's encoded bytes, as they stream in, into frames of its records.
 * Offsets are in the encoded value; records occupy [layout's first frame, its end).
 */
class FrameCutter {
  readonly #frameBytes: number;
  /** The first bytes, until the layout is known. */
  #head: Uint8Array[] = [];
  #layout: Layout | undefined;
  #hasher: ValueHasher | undefined;
  /** Bytes of the value seen so far. */
  #seen = 0;
  /** Record bytes not yet sent, from `#frameStart` on, each with its offset in the value. */
  readonly #pending: { at: number; bytes: Uint8Array }[] = [];
  #frameStart = 0;
  /** Where the next record's header begins. */
  #next = 0;
  /** Index in `#pending` of the part holding `#next` (or before it): headers are read forward only. */
  #scan = 0;
  readonly #trailer = new Uint8Array(TRAILER_BYTES);

  constructor(frameBytes: number) {
    this.#frameBytes = frameBytes;
  }

  *take(piece: Uint8Array): Generator<Uint8Array> {
    if (this.#layout === undefined) {
      this.#head.push(piece);
      const head = Buffer.concat(this.#head);
      const layout = parseLayout(head);
      if (typeof layout === 'number') return;
      if (layout.headerKind !== HeaderKind.Binary) throw new ShuffleIncompleteError('a shuffle chunk is not a binary value');
      this.#layout = layout;
      this.#hasher = new ValueHasher(layout.trailerOffset);
      this.#frameStart = this.#next = layout.frameOffsets[0];
      this.#head = [];
      piece = head;
    }
    const layout = this.#layout;
    const at = this.#seen;
    this.#seen += piece.byteLength;
    (this.#hasher as ValueHasher).update(piece);
    const recordsStart = layout.frameOffsets[0];
    const recordsEnd = recordsStart + layout.frameLengths[0];
    // The trailer's bytes, wherever the piece boundaries fall.
    for (let i = Math.max(at, layout.trailerOffset); i < Math.min(this.#seen, layout.totalLength); i++) this.#trailer[i - layout.trailerOffset] = piece[i - at];
    const from = Math.max(at, recordsStart);
    const to = Math.min(this.#seen, recordsEnd);
    if (to <= from) return;
    this.#pending.push({ at: from, bytes: piece.subarray(from - at, to - at) });
    // Every record whose header has come: a frame is sent before the record that would overfill it.
    while (this.#next + RECORD_HEADER_BYTES <= to) {
      const length = recordLength(this.#u32(this.#next + 16));
      if (this.#next + length > recordsEnd) throw new ShuffleIncompleteError('a malformed shuffle record in a spilled chunk');
      if (this.#next > this.#frameStart && this.#next + length - this.#frameStart > this.#frameBytes) yield this.#cut(this.#next);
      this.#next += length;
    }
  }

  *end(key: string): Generator<Uint8Array> {
    const layout = this.#layout;
    if (layout === undefined || this.#seen !== layout.totalLength) throw new ShuffleIncompleteError(`the spilled shuffle chunk ${JSON.stringify(key)} ended early`);
    const expected = readChecksum(this.#trailer, 0);
    const actual = (this.#hasher as ValueHasher).digest();
    if (expected !== actual) throw new ChecksumError(expected, actual, `spilled shuffle chunk ${JSON.stringify(key)}`);
    const recordsEnd = layout.frameOffsets[0] + layout.frameLengths[0];
    if (this.#next !== recordsEnd) throw new ShuffleIncompleteError('a truncated shuffle record in a spilled chunk');
    if (recordsEnd > this.#frameStart) yield this.#cut(recordsEnd);
  }

  /** The pending bytes up to `end` as one frame (copied: the read's buffers are not kept). */
  #cut(end: number): Uint8Array {
    const parts: Uint8Array[] = [];
    while (this.#pending.length > 0 && this.#pending[0].at < end) {
      const first = this.#pending[0];
      const take = Math.min(first.bytes.byteLength, end - first.at);
      parts.push(first.bytes.subarray(0, take));
      if (take === first.bytes.byteLength) {
        this.#pending.shift();
        this.#scan = Math.max(0, this.#scan - 1);
      } else {
        this.#pending[0] = { at: end, bytes: first.bytes.subarray(take) };
      }
    }
    this.#frameStart = end;
    return Buffer.concat(parts);
  }

  /** The u32 (little-endian) at value offset `at` (at or past the last one read), from the pending bytes. */
  #u32(at: number): number {
    let value = 0;
    for (let n = 0; n < 4; n++) {
      while (at + n >= this.#pending[this.#scan].at + this.#pending[this.#scan].bytes.byteLength) this.#scan++;
      const part = this.#pending[this.#scan];
      value += part.bytes[at + n - part.at] * 2 ** (8 * n);
    }
    return value;
  }
}
