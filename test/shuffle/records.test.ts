import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { RECORD_HEADER_BYTES, parseRecordViews, parseRecords, recordLength, writeRecordHeader } from '../../src/shuffle/records.js';

/** Records of the given payload lengths, concatenated as a push frame lays them out. */
function frameOf(lengths: readonly number[]): Uint8Array {
  const out = new Uint8Array(lengths.reduce((sum, n) => sum + recordLength(n), 0));
  let at = 0;
  lengths.forEach((length, i) => {
    writeRecordHeader(out, at, { output: i * 7, input: 3, part: 0, parts: 1, length });
    for (let b = 0; b < length; b++) out[at + RECORD_HEADER_BYTES + b] = (i * 31 + b) & 0xff;
    at += recordLength(length);
  });
  return out;
}

/** `bytes` cut at `cuts`, as socket reads deliver a push. */
function cut(bytes: Uint8Array, cuts: readonly number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))].sort((a, b) => a - b);
  const parts: Uint8Array[] = [];
  let start = 0;
  for (const point of [...points, bytes.byteLength]) {
    parts.push(bytes.subarray(start, point));
    start = point;
  }
  return parts;
}

test('records read from a push cut anywhere are the records of the whole frame, as views (headers split across reads included)', () => {
  fc.assert(
    fc.property(fc.array(fc.nat({ max: 300 }), { minLength: 1, maxLength: 8 }), fc.array(fc.nat(), { maxLength: 12 }), (lengths, cuts) => {
      const frame = frameOf(lengths);
      const whole = [...parseRecords(frame)].map((r) => ({ output: r.output, hex: Buffer.from(r.record).toString('hex') }));
      const viewed = [...parseRecordViews(cut(frame, cuts))].map((r) => {
        for (const view of r.views) assert.equal(view.buffer, frame.buffer, 'a record is views of the push, not a copy');
        return { output: r.output, hex: Buffer.concat(r.views).toString('hex') };
      });
      assert.deepEqual(viewed, whole);
    }),
    { numRuns: 300, seed: 30 },
  );
});

test('bytes that are not whole records are refused with SPW_ERR_SHUFFLE_INCOMPLETE, however they are cut', () => {
  const frame = frameOf([10, 20]);
  for (const bytes of [frame.subarray(0, frame.byteLength - 8), frame.subarray(0, 10)]) {
    for (const cuts of [[], [5], [1, 2, 3, 30]]) {
      assert.throws(() => [...parseRecordViews(cut(bytes, cuts))], (err: Error & { code?: string }) => err.code === 'SPW_ERR_SHUFFLE_INCOMPLETE');
    }
  }
});
