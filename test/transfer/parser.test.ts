import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  FrameTooLargeError,
  type Message,
  MessageType,
  type ParsedEvent,
  Parser,
  ProtocolError,
  TransferError,
} from '../../src/transfer/index.js';
import { serialize } from '../../src/transfer/serializer.js';

const nonce = new Uint8Array(32).fill(3);
const proof = new Uint8Array(32).fill(9);

const samples: Message[] = [
  { type: MessageType.Hello, version: 1, nonce },
  { type: MessageType.HelloOk, version: 1, authRequired: true, nonce, proof },
  { type: MessageType.Auth, proof },
  { type: MessageType.Ready },
  { type: MessageType.GetData, requestId: 7, maxBytes: 50_000_000, keys: ['a', '', 'ключ', 'x'.repeat(300)] },
  { type: MessageType.Value, requestId: 7, index: 0, byteLength: 3 },
  { type: MessageType.Missing, requestId: 7, index: 1 },
  { type: MessageType.DataDone, requestId: 7, answered: 2 },
  { type: MessageType.Busy, requestId: 8, retryAfterMs: 50 },
  { type: MessageType.Request, requestId: 9, body: Uint8Array.of(1, 2, 3) },
  { type: MessageType.Response, requestId: 9, body: new Uint8Array(0) },
  { type: MessageType.Error, requestId: 0, code: 'SPW_ERR_AUTH', message: 'no — wrong token' },
];

function stream(): Buffer {
  const parts: Buffer[] = [];
  for (const m of samples) {
    parts.push(serialize(m));
    if (m.type === MessageType.Value) parts.push(Buffer.from('abc'));
  }
  return Buffer.concat(parts);
}

/** Parses `bytes` cut at `cuts`; returns messages (normalized) and the value bytes seen. */
function parseAll(bytes: Buffer, cuts: number[], parser = new Parser()): { messages: unknown[]; raw: Buffer } {
  const messages: unknown[] = [];
  const raw: Buffer[] = [];
  const emit = (e: ParsedEvent): void => {
    if (e.kind === 'message') messages.push(normalize(e.message));
    else if (e.kind === 'value-chunk') raw.push(Buffer.from(e.bytes));
    else messages.push('value-end');
  };
  let start = 0;
  for (const cut of [...cuts].sort((a, b) => a - b)) {
    parser.parse(bytes.subarray(start, cut), emit);
    start = cut;
  }
  parser.parse(bytes.subarray(start), emit);
  parser.end();
  return { messages, raw: Buffer.concat(raw) };
}

function normalize(m: Message): unknown {
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [k, v instanceof Uint8Array ? [...v] : v]));
}

const expected = samples.flatMap((m) => (m.type === MessageType.Value ? [normalize(m), 'value-end'] : [normalize(m)]));

describe('parser', () => {
  it('round-trips every message type through the serializer', () => {
    const { messages, raw } = parseAll(stream(), []);
    assert.deepEqual(messages, expected);
    assert.equal(raw.toString(), 'abc');
  });

  it('gives the same result however the stream is cut (every single cut, then random cuts)', () => {
    const bytes = stream();
    for (let i = 0; i <= bytes.length; i++) assert.deepEqual(parseAll(bytes, [i]).messages, expected);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: bytes.length }), { maxLength: 40 }), (cuts) => {
        const { messages, raw } = parseAll(bytes, cuts);
        assert.deepEqual(messages, expected);
        assert.equal(raw.toString(), 'abc');
      }),
    );
  });

  it('passes value bytes on as views of the incoming chunk, without copying', () => {
    const frame = Buffer.concat([serialize({ type: MessageType.Value, requestId: 1, index: 0, byteLength: 4 }), Buffer.from('wxyz')]);
    const chunks: Buffer[] = [];
    new Parser().parse(frame, (e) => {
      if (e.kind === 'value-chunk') chunks.push(e.bytes);
    });
    assert.equal(chunks.length, 1);
    assert.equal(chunks[0].buffer, frame.buffer);
  });

  it('refuses a declared frame length above the limit from the header alone', () => {
    const parser = new Parser({ maxFrameBytes: 1024 });
    const header = Buffer.from([MessageType.GetData, 0, 0, 0, 0x7f]); // ~2 GiB declared
    assert.throws(() => parser.parse(header, () => undefined), FrameTooLargeError);
    // A dead parser stays dead.
    assert.throws(() => parser.parse(Buffer.alloc(1), () => undefined), FrameTooLargeError);
  });

  it('refuses a value above maxValueBytes before any of its bytes arrive', () => {
    const parser = new Parser({ maxValueBytes: 1000 });
    const frame = serialize({ type: MessageType.Value, requestId: 1, index: 0, byteLength: 1001 });
    assert.throws(() => parser.parse(frame, () => undefined), (e: unknown) => e instanceof FrameTooLargeError && e.code === 'SPW_ERR_FRAME_TOO_LARGE');
    const huge = Buffer.from(frame);
    huge.writeBigUInt64LE(2n ** 63n, 13);
    assert.throws(() => new Parser().parse(huge, () => undefined), FrameTooLargeError);
  });

  it('rejects unknown types, wrong fixed lengths and malformed bodies with ProtocolError', () => {
    const bad = [
      Buffer.from([0x99, 0, 0, 0, 0]),
      Buffer.from([MessageType.Ready, 1, 0, 0, 0, 0]),
      Buffer.from([MessageType.Missing, 4, 0, 0, 0, 1, 2, 3, 4]),
      // GetData claiming a million keys in 16 bytes.
      (() => {
        const f = serialize({ type: MessageType.GetData, requestId: 1, maxBytes: 1, keys: [] });
        f.writeUInt32LE(1_000_000, 17);
        return f;
      })(),
      // A key length overrunning the frame.
      (() => {
        const f = serialize({ type: MessageType.GetData, requestId: 1, maxBytes: 1, keys: ['abc'] });
        f.writeUInt32LE(99, 21);
        return f;
      })(),
      // Invalid utf-8 in a key.
      (() => {
        const f = serialize({ type: MessageType.GetData, requestId: 1, maxBytes: 1, keys: ['ab'] });
        f[25] = 0xff;
        return f;
      })(),
      (() => {
        const f = serialize({ type: MessageType.Hello, version: 1, nonce });
        f.writeUInt32LE(0x12345678, 5);
        return f;
      })(),
    ];
    for (const frame of bad) assert.throws(() => new Parser().parse(frame, () => undefined), ProtocolError, frame.toString('hex'));
  });

  it('reports a stream that ends inside a frame or a value as truncated', () => {
    const value = Buffer.concat([serialize({ type: MessageType.Value, requestId: 1, index: 0, byteLength: 10 }), Buffer.from('abc')]);
    for (const cut of [1, 4, 10, value.length]) {
      const parser = new Parser();
      parser.parse(value.subarray(0, cut), () => undefined);
      assert.throws(() => parser.end(), TransferError);
    }
    const clean = new Parser();
    clean.parse(serialize({ type: MessageType.Ready }), () => undefined);
    assert.doesNotThrow(() => clean.end());
  });
});
