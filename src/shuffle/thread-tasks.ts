/**
 * The shuffle's work that runs on a task thread, never on the worker's event loop: calling
 * the user's split and combine functions, encoding pieces and decoding them.
 *
 * Pieces travel and are stored as records (records.ts): encoded once here after the split,
 * never decoded until the output they belong to is assembled, here again.
 */
import type { FunctionRef } from '../cluster/protocol.js';
import { type Encoded, SMALL_ENCODED_BYTES, encode, encodedBatches, writeEncodedSync } from '../codec/encode.js';
import { checkChecksum, decodeBody, decodeVerified, layoutOfBytes } from '../codec/decode.js';
import { ValueHasher } from '../codec/checksum.js';
import { ShuffleIncompleteError, ShuffleSplitError } from './errors.js';
import { RECORD_HEADER_BYTES, parseRecords, recordLength, writeRecordHeader } from './records.js';
import { RELEASE_MIN_BYTES, buffersIn, releaseBuffers } from '../runtime/buffer-release.js';
import { leaveGarbage } from '../worker/thread-garbage.js';

export interface SplitRequest {
  split: FunctionRef;
  splitArgs: unknown[];
  partitions: number;
  input: number;
  /** Participants: output j goes to destination j % destinations. */
  destinations: number;
  /** Outputs not to send (already assembled). */
  skip: number[];
  /** Largest frame: a piece longer than this is cut into parts. */
  frameBytes: number;
  /**
   * Shared buffers of frameBytes from the worker's pool (frame-spares.ts): frames are laid
   * out in them before any new buffer is allocated. The result says which were filled.
   */
  spares?: SharedArrayBuffer[];
}

export interface SplitResult {
  /** Per destination, frames of records, each at most frameBytes. */
  frames: Uint8Array[][];
  /** Encoded bytes of the pieces sent. */
  bytes: number;
  /** Frames laid out in a lent spare buffer. */
  reused: number;
  /** Frames laid out in a buffer allocated here. */
  allocated: number;
  /** Indices in the request's `spares` of the spares frames were laid out in (the others are untouched). */
  sparesFilled: number[];
}

const modules = new Map<string, Promise<Record<string, unknown>>>();

async function userFunction(fn: FunctionRef): Promise<(...args: unknown[]) => unknown> {
  let loaded = modules.get(fn.module);
  if (loaded === undefined) {
    loaded = import(fn.module) as Promise<Record<string, unknown>>;
    loaded.catch(() => modules.delete(fn.module));
    modules.set(fn.module, loaded);
  }
  const found = (await loaded)[fn.name];
  if (typeof found !== 'function') throw new ShuffleSplitError(`module ${fn.module} has no exported function "${fn.name}"`);
  return found as (...args: unknown[]) => unknown;
}

/**
 * Buffers for frames: a frame at least half of frameBytes gets a whole buffer of frameBytes,
 * a lent spare when there is one, so that the worker can give it back for reuse once the
 * frame is pushed; a smaller one (a destination's last few records) gets a buffer of its
 * size, as one of frameBytes would hold memory it does not use while the receiver keeps it.
 */
class FrameBuffers {
  reused = 0;
  allocated = 0;
  /** Indices of the spares filled, in order: the first ones first (the worker lends those it had before those it made). */
  readonly filled: number[] = [];

  constructor(
    readonly frameBytes: number,
    readonly spares: readonly SharedArrayBuffer[],
  ) {}

  get(bytes: number): Uint8Array {
    if (bytes * 2 < this.frameBytes || bytes > this.frameBytes) {
      this.allocated++;
      return new Uint8Array(bytes);
    }
    if (this.filled.length < this.spares.length) {
      const at = this.filled.length;
      this.filled.push(at);
      this.reused++;
      return new Uint8Array(this.spares[at]);
    }
    this.allocated++;
    return new Uint8Array(this.frameBytes);
  }
}

/** Fills frames for one destination; a new frame starts when a record would not fit. */
class FrameWriter {
  readonly frames: Uint8Array[] = [];
  #current: Uint8Array | undefined;
  #at = 0;

  constructor(readonly buffers: FrameBuffers) {}

  /** Room for `bytes` more in the current frame, starting a new one (sized to what is left, at most frameBytes) if needed. */
  reserve(bytes: number, remaining: number): Uint8Array {
    if (this.#current === undefined || this.#at + bytes > this.#current.byteLength) {
      this.#seal();
      this.#current = this.buffers.get(Math.max(bytes, Math.min(this.buffers.frameBytes, remaining)));
      this.#at = 0;
    }
    return this.#current;
  }

  get at(): number {
    return this.#at;
  }

  advance(bytes: number): void {
    this.#at += bytes;
  }

  finish(): Uint8Array[] {
    this.#seal();
    return this.frames;
  }

  #seal(): void {
    if (this.#current !== undefined && this.#at > 0) this.frames.push(this.#current.subarray(0, this.#at));
    this.#current = undefined;
  }
}

/** Splits one input with the user's function and lays its pieces out as records, one list of frames per destination. */
export async function splitForShuffle(input: unknown, request: SplitRequest): Promise<SplitResult> {
  const { partitions: P, destinations, input: i, frameBytes } = request;
  const split = await userFunction(request.split);
  const pieces = await split(input, P, ...request.splitArgs);
  if (!Array.isArray(pieces) || pieces.length !== P) {
    throw new ShuffleSplitError(`${request.split.name} must return an array of ${P} pieces, got ${Array.isArray(pieces) ? `${pieces.length}` : typeof pieces}`);
  }
  const skip = new Set(request.skip);
  const encoded = pieces.map((piece, j) => (skip.has(j) ? undefined : encode(piece)));
  // Bytes still to lay out per destination, so that a destination's last frame is no larger than it needs.
  const remaining = new Array<number>(destinations).fill(0);
  encoded.forEach((e, j) => {
    if (e !== undefined) remaining[j % destinations] += recordBytesOf(e.byteLength, frameBytes);
  });
  const buffers = new FrameBuffers(frameBytes, request.spares ?? []);
  const writers = Array.from({ length: destinations }, () => new FrameWriter(buffers));
  let bytes = 0;
  const wholes: Uint8Array[] = [];
  for (let j = 0; j < P; j++) {
    const e = encoded[j];
    if (e === undefined) continue;
    const d = j % destinations;
    const writer = writers[d];
    const maxPayload = frameBytes - RECORD_HEADER_BYTES;
    bytes += e.byteLength;
    if (e.byteLength <= maxPayload) {
      const length = recordLength(e.byteLength);
      const frame = writer.reserve(length, remaining[d]);
      writeRecordHeader(frame, writer.at, { output: j, input: i, part: 0, parts: 1, length: e.byteLength });
      await writeEncoded(e, frame, writer.at + RECORD_HEADER_BYTES);
      writer.advance(length);
      remaining[d] -= length;
      continue;
    }
    // A piece larger than a frame: encoded whole once, then cut into parts.
    const whole = new Uint8Array(e.byteLength);
    wholes.push(whole);
    await writeEncoded(e, whole, 0);
    const parts = Math.ceil(e.byteLength / maxPayload);
    for (let part = 0; part < parts; part++) {
      const payload = whole.subarray(part * maxPayload, Math.min(e.byteLength, (part + 1) * maxPayload));
      const length = recordLength(payload.byteLength);
      const frame = writer.reserve(length, remaining[d]);
      writeRecordHeader(frame, writer.at, { output: j, input: i, part, parts, length: payload.byteLength });
      frame.set(payload, writer.at + RECORD_HEADER_BYTES);
      writer.advance(length);
      remaining[d] -= length;
    }
  }
  // The pieces are laid out: their buffers, which only this call holds (as a task's result
  // would be moved away), are freed now rather than left for a collection of this thread.
  // Small ones are left to the collector, and counted for it: at thousands of partitions
  // they are most of what a split leaves.
  // Pieces that view the input leave its buffer alone: it is lent, and goes back to the worker.
  const pieceBuffers = buffersIn([pieces, wholes], 0);
  if (ArrayBuffer.isView(input)) pieceBuffers.delete(input.buffer as ArrayBuffer);
  let pieceBytes = 0;
  for (const buffer of pieceBuffers) pieceBytes += buffer.byteLength;
  leaveGarbage(pieceBytes - releaseBuffers([...pieceBuffers].filter((b) => b.byteLength >= RELEASE_MIN_BYTES)));
  return { frames: writers.map((w) => w.finish()), bytes, reused: buffers.reused, allocated: buffers.allocated, sparesFilled: buffers.filled };
}

/** Lays an encoded value out at `offset`, checksum included: in one step when small, batch by batch when not. */
async function writeEncoded(e: Encoded, out: Uint8Array, offset: number): Promise<void> {
  if (e.byteLength <= SMALL_ENCODED_BYTES) {
    writeEncodedSync(e, out, offset);
    return;
  }
  let at = offset;
  for await (const batch of encodedBatches(e)) {
    for (const piece of batch) {
      out.set(piece, at);
      at += piece.byteLength;
    }
  }
}

function recordBytesOf(encodedBytes: number, frameBytes: number): number {
  const maxPayload = frameBytes - RECORD_HEADER_BYTES;
  const parts = Math.max(1, Math.ceil(encodedBytes / maxPayload));
  return encodedBytes + parts * (RECORD_HEADER_BYTES + 8);
}

export interface AssembleRequest {
  output: number;
  partitions: number;
  /** Inputs of the shuffle: a piece from each is expected. */
  inputs: number;
  combine: FunctionRef | null;
  combineArgs: unknown[];
}

/** A chunk of records, or a chunk as the store encoded it (taken from the disk tier: checked and decoded here, off the loop). */
export type AssembleChunk = Uint8Array | { encoded: Uint8Array };

/**
 * Assembles output j from chunks of records: checks that every input's piece is there
 * exactly once (else ShuffleIncompleteError: never a wrong result), decodes the pieces in
 * input order and hands them to the user's combine function.
 */
export async function assembleOutput(chunks: AssembleChunk[], request: AssembleRequest): Promise<unknown> {
  const { inputs, output } = request;
  const parts: (Uint8Array[] | undefined)[] = new Array(inputs);
  for (const item of chunks) {
    const chunk = item instanceof Uint8Array ? item : await decodeVerified(item.encoded, `a chunk of shuffle output ${output}`);
    if (!(chunk instanceof Uint8Array)) throw new ShuffleIncompleteError(`a chunk of output ${output} holds no records`);
    for (const record of parseRecords(chunk)) {
      if (record.output !== output) throw new ShuffleIncompleteError(`a piece for output ${record.output} was filed under output ${output}`);
      if (record.input >= inputs) throw new ShuffleIncompleteError(`a piece from input ${record.input} of a shuffle of ${inputs} inputs`);
      let list = parts[record.input];
      if (list === undefined) {
        list = new Array(record.parts);
        parts[record.input] = list;
      }
      if (list.length !== record.parts || list[record.part] !== undefined) {
        throw new ShuffleIncompleteError(`output ${output} holds input ${record.input}'s piece twice`);
      }
      list[record.part] = record.payload;
    }
  }
  // Loaded first: the types it registers decode the pieces.
  const combine = request.combine === null ? undefined : await userFunction(request.combine);
  const pieces: unknown[] = new Array(inputs);
  for (let i = 0; i < inputs; i++) {
    const list = parts[i];
    if (list === undefined) throw new ShuffleIncompleteError(`output ${output} has no piece from input ${i}`);
    let bytes: Uint8Array;
    if (list.length === 1 && list[0] !== undefined && list[0].byteOffset % 8 === 0) {
      bytes = list[0];
    } else {
      // Parts joined, or a lone piece copied to an 8-byte-aligned buffer so typed arrays view it in place.
      let total = 0;
      for (let p = 0; p < list.length; p++) {
        const part = list[p];
        if (part === undefined) throw new ShuffleIncompleteError(`output ${output} lacks part ${p} of input ${i}'s piece`);
        total += part.byteLength;
      }
      bytes = new Uint8Array(total);
      let at = 0;
      for (const part of list as Uint8Array[]) {
        bytes.set(part, at);
        at += part.byteLength;
      }
    }
    const layout = layoutOfBytes(bytes);
    checkChecksum(bytes, layout, new ValueHasher(layout.trailerOffset).update(bytes).digest(), `shuffle piece ${i} → ${output}`);
    pieces[i] = decodeBody(bytes, layout);
  }
  if (combine === undefined) return pieces;
  return await combine(pieces, ...request.combineArgs);
}
