/**
 * A Connection's parser frees the socket reads a RequestBytes' payload arrived in once the
 * consumer lets go of it (parser.ts, ReadBuffer), and never a read anything else may still
 * view: a Value's raw bytes, another message's body, a payload not let go of, or a caller's
 * own buffers.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { RELEASE_MIN_BYTES } from '../../src/runtime/buffer-release.js';
import { type Message, MessageType, type ParsedEvent, Parser, type RequestBytesMessage } from '../../src/transfer/index.js';
import { serialize } from '../../src/transfer/serializer.js';

const KiB = 1024;

/** `bytes` cut at `cuts` into reads, each a whole ArrayBuffer of its own (as Node's socket reads are). */
function reads(bytes: Uint8Array, cuts: readonly number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let start = 0;
  for (const end of [...points, bytes.byteLength]) {
    if (end <= start) continue;
    const own = new ArrayBuffer(end - start);
    new Uint8Array(own).set(bytes.subarray(start, end));
    out.push(Buffer.from(own));
    start = end;
  }
  return out;
}

function filled(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = (i * 31 + seed) & 0xff;
  return out;
}

function requestBytes(requestId: number, payload: Uint8Array): Message {
  return { type: MessageType.RequestBytes, requestId, body: Uint8Array.of(0x90 + (requestId & 0x0f)), payload: [payload] };
}

const joined = (m: RequestBytesMessage): Buffer => Buffer.concat(m.payload);

test('a read is freed once the payloads viewing it are let go of, and a read two frames share waits for both', () => {
  const a = filled(150 * KiB, 1);
  const b = filled(150 * KiB, 2);
  const bytes = Buffer.concat([serialize(requestBytes(1, a)), serialize(requestBytes(2, b))]);
  // The middle read holds the end of the first payload and the start of the second.
  const chunks = reads(bytes, [100 * KiB, 200 * KiB]);
  assert.equal(chunks.length, 3);
  const parser = new Parser({ releaseReads: true });
  const got: RequestBytesMessage[] = [];
  for (const chunk of chunks) parser.parse(chunk, (e) => void (e.kind === 'message' && e.message.type === MessageType.RequestBytes && got.push(e.message)));
  assert.equal(got.length, 2);
  assert.ok(chunks.every((c) => c.buffer.byteLength > 0), 'nothing freed while both payloads are held');
  assert.deepEqual(joined(got[0]), Buffer.from(a));
  assert.deepEqual(joined(got[1]), Buffer.from(b));

  got[0].release?.();
  got[0].release?.(); // twice: no second let-go of the shared read
  assert.equal(chunks[0].buffer.byteLength, 0, 'the first read, viewed by the first payload alone, is freed');
  assert.ok(chunks[1].buffer.byteLength > 0, 'the shared read waits for the second payload');
  assert.deepEqual(joined(got[1]), Buffer.from(b), 'the second payload is intact');

  got[1].release?.();
  assert.equal(chunks[1].buffer.byteLength, 0);
  assert.equal(chunks[2].buffer.byteLength, 0);
});

test('reads under the threshold, a caller\'s own buffers, and reads a Value or another message views are kept', () => {
  const payload = filled(200 * KiB, 3);
  const raw = filled(100 * KiB, 4);
  const bytes = Buffer.concat([
    serialize(requestBytes(1, payload)),
    serialize({ type: MessageType.Value, requestId: 2, index: 0, byteLength: raw.byteLength }),
    Buffer.from(raw),
    serialize({ type: MessageType.Request, requestId: 3, body: filled(70 * KiB, 5) }),
  ]);
  const cut = serialize(requestBytes(1, payload)).byteLength;
  // Read 0: the first payload's head (small); read 1: the rest of it and the Value's start; then the Value and the Request.
  const chunks = reads(bytes, [16 * KiB, cut + 1000, cut + 90 * KiB]);
  for (const releaseReads of [true, false]) {
    // Fresh reads for each parser.
    const own = chunks.map((c) => {
      const ab = new ArrayBuffer(c.byteLength);
      new Uint8Array(ab).set(c);
      return Buffer.from(ab);
    });
    const parser = new Parser({ releaseReads, maxFrameBytes: 1 << 20 });
    const events: ParsedEvent[] = [];
    for (const chunk of own) parser.parse(chunk, (e) => void events.push(e));
    const request = events.find((e) => e.kind === 'message' && e.message.type === MessageType.RequestBytes);
    assert.ok(request?.kind === 'message' && request.message.type === MessageType.RequestBytes);
    request.message.release?.();
    const detached = own.map((c) => c.buffer.byteLength === 0);
    if (!releaseReads) assert.deepEqual(detached, own.map(() => false), "a caller's own buffers are never freed");
    else {
      assert.equal(own[0].byteLength < RELEASE_MIN_BYTES, true);
      assert.deepEqual(detached, [false, false, false, false], 'under the threshold, or viewed by the Value or the Request');
    }
    const value = Buffer.concat(events.flatMap((e) => (e.kind === 'value-chunk' ? [Buffer.from(e.bytes)] : [])));
    assert.deepEqual(value, Buffer.from(raw), 'the Value\'s bytes are intact');
    const last = events.findLast((e) => e.kind === 'message');
    assert.ok(last?.kind === 'message' && last.message.type === MessageType.Request);
    assert.deepEqual(Buffer.from(last.message.body), Buffer.from(filled(70 * KiB, 5)));
  }
});

test('property: a payload is intact until let go of; once every payload is let go of, every large read is freed', () => {
  const frame = fc.record({ size: fc.integer({ min: 0, max: 200 * KiB }), release: fc.boolean() });
  fc.assert(
    fc.property(fc.array(frame, { minLength: 1, maxLength: 6 }), fc.array(fc.nat(), { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 6 }), (frames, cuts, order) => {
      const payloads = frames.map((f, i) => filled(f.size, i));
      const bytes = Buffer.concat(payloads.map((p, i) => serialize(requestBytes(i, p))));
      const chunks = reads(bytes, cuts);
      const lengths = chunks.map((c) => c.byteLength);
      const parser = new Parser({ releaseReads: true });
      const got: RequestBytesMessage[] = [];
      for (const chunk of chunks) parser.parse(chunk, (e) => void (e.kind === 'message' && e.message.type === MessageType.RequestBytes && got.push(e.message)));
      parser.end();
      assert.equal(got.length, frames.length);
      // Let go of some, in a random order; the rest must read as sent.
      const released = new Set<number>();
      for (const k of order) {
        const i = k % frames.length;
        if (!frames[i].release) continue;
        got[i].release?.();
        released.add(i);
        for (let j = 0; j < frames.length; j++) if (!released.has(j)) assert.deepEqual(joined(got[j]), Buffer.from(payloads[j]), `payload ${j}`);
      }
      for (let i = 0; i < frames.length; i++) got[i].release?.();
      chunks.forEach((chunk, i) => assert.equal(chunk.buffer.byteLength === 0, lengths[i] >= RELEASE_MIN_BYTES, `read ${i} of ${lengths[i]} bytes`));
    }),
    { numRuns: 60 },
  );
});
