/** Shuffle frames for receiver tests, and a scheduler channel for shuffle services under test. */
import assert from 'node:assert/strict';
import type { Channel } from '../../src/control/channel.js';
import { ShuffleMethods, type ShuffleRunInfo } from '../../src/shuffle/protocol.js';
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

/** A scheduler channel for a shuffle service under test: it answers `shuffle-get` with `info`, and takes notifications. */
export function runInfoChannel(info: ShuffleRunInfo): Channel {
  const channel = {
    request: async (method: string): Promise<ShuffleRunInfo> => {
      assert.equal(method, ShuffleMethods.get);
      return info;
    },
    notify: (): void => undefined,
  };
  return channel as unknown as Channel;
}
