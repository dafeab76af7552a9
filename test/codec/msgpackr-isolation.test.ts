/**
 * Spillway's msgpackr extension (type 0x53, frame references) lives on a private copy of
 * msgpackr: an application's extensions of the same type, on the msgpackr it imports or
 * requires, registered before or after Spillway's first use, work on both sides.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import * as esm from 'msgpackr';
import { decodeVerified, encodeToBuffer } from '../../src/codec/index.js';

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}

type Msgpackr = typeof esm;
const cjs = createRequire(import.meta.url)('msgpackr') as Msgpackr;

function registerPoint(m: Msgpackr): void {
  m.addExtension({ Class: Point, type: 0x53, write: (p: Point) => [p.x, p.y], read: ([x, y]: [number, number]) => new Point(x, y) });
}

function assertPointsRoundTrip(): void {
  for (const m of [esm, cjs]) {
    const back = m.unpack(m.pack({ at: new Point(3, 4) })) as { at: unknown };
    assert.ok(back.at instanceof Point, 'the application decodes its own type 0x53');
    assert.deepEqual({ ...back.at }, { x: 3, y: 4 });
  }
}

async function assertSpillwayRoundTrip(): Promise<void> {
  // Binary payloads inside plain data are frame references (type 0x53) in the header.
  const value = { label: 'mixed', samples: new Float64Array([1.5, 2.5]), raw: Buffer.from('bytes'), nested: [new Uint8Array([1, 2, 3])] };
  assert.deepEqual(await decodeVerified(await encodeToBuffer(value)), value);
}

test('the application and Spillway each use msgpackr extension type 0x53, in any order', async () => {
  registerPoint(esm);
  registerPoint(cjs);
  await assertSpillwayRoundTrip();
  assertPointsRoundTrip();
  registerPoint(esm);
  registerPoint(cjs);
  await assertSpillwayRoundTrip();
  assertPointsRoundTrip();
  assert.notEqual(createRequire(import.meta.url)('msgpackr'), undefined);
  assert.equal(createRequire(import.meta.url)('msgpackr'), cjs, "the application's require('msgpackr') still gets its own copy");
});
