/** Shuffle frames for receiver tests. */
import { RECORD_HEADER_BYTES, recordLength, writeRecordHeader } from '../../src/shuffle/records.js';

/** A frame of one record per output in `outputs`, payload bytes derived from (input, output, byte). */
export function recordFrame(input: number, outputs: readonly number[], payloadBytes: number): Uint8Array {
  const out = new Uint8Array(outputs.length * recordLength(payloadBytes));
  let at = 0;
  for (const output of outputs) {
    writeRecordHeader(out, at, { output, input, part: 0, parts: 1, length: payloadBytes });
    for (let b = 0; b < payloadBytes; b++) out[at + RECORD_HEADER_BYTES + b] = (input * 7 + output * 13 + b) & 0xff;
    at += recordLength(payloadBytes);
  }
  return out;
}
