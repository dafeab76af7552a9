import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeVerified } from '../../src/codec/decode.js';
import { parseRecords } from '../../src/shuffle/records.js';
import { splitForShuffle } from '../../src/shuffle/thread-tasks.js';
import { takeLeftGarbage } from '../../src/worker/thread-garbage.js';
import { keptPieces, pattern } from './fixtures/split.js';
import { ext } from '../helpers/suite.js';

const SPLIT = { module: new URL(`./fixtures/split${ext}`, import.meta.url).href, name: 'keptSlices' };

test("a split frees its pieces' buffers once they are laid out, and its frames hold every byte", async () => {
  const input = pattern(1 << 20, 7);
  const P = 4;
  // Frames smaller than a piece: each piece is encoded whole, then cut into parts.
  const result = await splitForShuffle(input, { split: SPLIT, splitArgs: [], partitions: P, input: 3, destinations: 2, skip: [], frameBytes: 64 * 1024 });
  assert.equal(keptPieces.length, P);
  for (const piece of keptPieces) assert.equal(piece.byteLength, 0, 'a piece of 256 KiB is detached');
  assert.equal(takeLeftGarbage(), 0, 'nothing left for the collector');
  const parts = new Map<number, Uint8Array[]>();
  result.frames.forEach((frames, d) => {
    for (const frame of frames) {
      for (const record of parseRecords(frame)) {
        assert.equal(record.output % 2, d, 'output j goes to destination j % 2');
        assert.equal(record.input, 3);
        const list = parts.get(record.output) ?? new Array<Uint8Array>(record.parts);
        list[record.part] = record.payload.slice();
        parts.set(record.output, list);
      }
    }
  });
  for (let j = 0; j < P; j++) {
    const list = parts.get(j) ?? [];
    const whole = new Uint8Array(list.reduce((n, p) => n + p.byteLength, 0));
    let at = 0;
    for (const p of list) {
      whole.set(p, at);
      at += p.byteLength;
    }
    const piece = await decodeVerified(whole, `piece ${j}`);
    assert.deepEqual(piece, input.slice(j * (1 << 18), (j + 1) * (1 << 18)), `output ${j} arrives whole`);
  }
});

test('small pieces are left to the collector, and counted for it', async () => {
  takeLeftGarbage();
  const input = pattern(4096, 1);
  await splitForShuffle(input, { split: SPLIT, splitArgs: [], partitions: 4, input: 0, destinations: 1, skip: [], frameBytes: 64 * 1024 });
  for (const piece of keptPieces) assert.equal(piece.byteLength, 1024);
  assert.equal(takeLeftGarbage(), 4096);
  assert.equal(takeLeftGarbage(), 0, 'taken once');
});

test("pieces that view the input never free the input's memory: it is lent, and goes back for another split", async () => {
  const input = pattern(1 << 20, 5);
  const views = { module: SPLIT.module, name: 'views' };
  await splitForShuffle(input, { split: views, splitArgs: [], partitions: 4, input: 0, destinations: 2, skip: [], frameBytes: 64 * 1024 });
  assert.equal(input.byteLength, 1 << 20, 'not detached');
  assert.deepEqual(input, pattern(1 << 20, 5), 'and unchanged');
  assert.equal(takeLeftGarbage(), 0, 'nothing of it counted as garbage either');
});
