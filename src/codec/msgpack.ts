import type { Packr } from 'msgpackr';
import { restoreBinary } from './binary.js';
import { msgpackr } from './msgpackr.js';
import { FrameRef, TypedRef } from './plan.js';
import { decodeTyped } from './types.js';

/** msgpackr extension types for FrameRef and TypedRef; fixed, they are part of the format. */
const FRAME_REF_EXTENSION = 0x53;
const TYPED_REF_EXTENSION = 0x54;

// The frames of the value being decoded. Decoding is synchronous, so one slot suffices.
let decodingFrames: readonly Uint8Array[] | undefined;

let packr: Packr | undefined;

/** The header packer, made on first use, with the FrameRef extension on Spillway's private msgpackr. */
function headerPackr(): Packr {
  if (packr !== undefined) return packr;
  const { Packr, addExtension } = msgpackr();
  addExtension({
    Class: FrameRef,
    type: FRAME_REF_EXTENSION,
    write(ref: FrameRef) {
      return [ref.index, ref.tag];
    },
    read(data: unknown) {
      if (!Array.isArray(data) || data.length !== 2 || decodingFrames === undefined) {
        throw new RangeError('malformed frame reference');
      }
      const [index, tag] = data as [number, number];
      const frame = decodingFrames[index];
      if (frame === undefined) throw new RangeError(`frame reference ${index} out of range`);
      return restoreBinary(tag, frame);
    },
  });
  addExtension({
    Class: TypedRef,
    type: TYPED_REF_EXTENSION,
    write(ref: TypedRef) {
      return [ref.name, ref.meta, ref.first, ref.count];
    },
    read(data: unknown) {
      if (!Array.isArray(data) || data.length !== 4 || decodingFrames === undefined) throw new RangeError('malformed typed value reference');
      const [name, meta, first, count] = data as [unknown, unknown, unknown, unknown];
      if (typeof name !== 'string' || !Number.isSafeInteger(first) || !Number.isSafeInteger(count)) throw new RangeError('malformed typed value reference');
      const end = (first as number) + (count as number);
      if ((first as number) < 0 || (count as number) < 0 || end > decodingFrames.length) throw new RangeError(`typed value frames ${first as number}..${end} out of range`);
      return decodeTyped(name, { meta, buffers: decodingFrames.slice(first as number, end) });
    },
  });
  packr = new Packr({ mapsAsObjects: false, moreTypes: true, int64AsType: 'bigint', useRecords: true });
  return packr;
}

export function packHeader(template: unknown): Buffer {
  return headerPackr().pack(template);
}

export function unpackHeader(header: Uint8Array, frames: readonly Uint8Array[]): unknown {
  const unpacker = headerPackr();
  decodingFrames = frames;
  try {
    return unpacker.unpack(header);
  } finally {
    decodingFrames = undefined;
  }
}
