import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { SpillwayError } from '../../src/index.js';
import { type Message, MessageType, type ParsedEvent, Parser } from '../../src/transfer/index.js';
import { serialize } from '../../src/transfer/serializer.js';

/**
 * Properties of the incremental parser over generated conversations (parser.test.ts has
 * fixed samples): any sequence of valid messages, cut anywhere, parses back to itself; any
 * bytes at all give the same events and the same typed error however they are cut.
 */

const u32 = fc.nat({ max: 0xffffffff });
const bytes32 = fc.uint8Array({ minLength: 32, maxLength: 32 });
// Well-formed strings only: a lone surrogate does not survive UTF-8 (it becomes U+FFFD).
const text = (maxLength: number) => fc.string({ unit: 'grapheme', maxLength });

const messageArb: fc.Arbitrary<{ message: Message; raw?: Uint8Array }> = fc.oneof(
  fc.record({ type: fc.constant(MessageType.Hello), version: fc.nat({ max: 0xffff }), nonce: bytes32 }),
  fc.record({ type: fc.constant(MessageType.HelloOk), version: fc.nat({ max: 0xffff }), authRequired: fc.boolean(), nonce: bytes32, proof: bytes32 }),
  fc.record({ type: fc.constant(MessageType.Auth), proof: bytes32 }),
  fc.constant({ type: MessageType.Ready as const }),
  fc.record({
    type: fc.constant(MessageType.GetData),
    requestId: u32,
    maxBytes: fc.maxSafeNat(),
    keys: fc.array(text(20), { maxLength: 6 }),
  }),
  fc.record({ type: fc.constant(MessageType.Missing), requestId: u32, index: u32 }),
  fc.record({ type: fc.constant(MessageType.DataDone), requestId: u32, answered: u32 }),
  fc.record({ type: fc.constant(MessageType.Busy), requestId: u32, retryAfterMs: u32 }),
  fc.record({ type: fc.constant(MessageType.Request), requestId: u32, body: fc.uint8Array({ maxLength: 40 }) }),
  fc.record({ type: fc.constant(MessageType.Response), requestId: u32, body: fc.uint8Array({ maxLength: 40 }) }),
  fc.record({ type: fc.constant(MessageType.RequestBytes), requestId: u32, body: fc.uint8Array({ maxLength: 40 }), payload: fc.array(fc.uint8Array({ maxLength: 60 }), { maxLength: 3 }) }),
  fc.record({ type: fc.constant(MessageType.Error), requestId: u32, code: text(12), message: text(40) }),
).map((message) => ({ message: message as Message }));

const valueArb = fc
  .tuple(u32, u32, fc.uint8Array({ maxLength: 300 }))
  .map(([requestId, index, raw]) => ({ message: { type: MessageType.Value, requestId, index, byteLength: raw.byteLength } as Message, raw }));

const conversationArb = fc.array(fc.oneof({ weight: 4, arbitrary: messageArb }, { weight: 1, arbitrary: valueArb }), { maxLength: 12 });

function plain(message: Message): unknown {
  return Object.fromEntries(
    Object.entries(message).map(([k, v]: [string, unknown]) => [
      k,
      // A RequestBytes' payload comes as views of however the bytes were cut: compared joined.
      v instanceof Uint8Array ? Buffer.from(v).toString('hex') : k === 'payload' ? Buffer.concat(v as Uint8Array[]).toString('hex') : v,
    ]),
  );
}

/** Events as comparable data: value chunks merged up to their value-end; the error (if any) by class and code. */
function run(bytes: Buffer, cuts: readonly number[], options = { maxFrameBytes: 1024, maxValueBytes: 4096 }) {
  const parser = new Parser(options);
  const events: unknown[] = [];
  let raw: Buffer[] = [];
  const emit = (e: ParsedEvent): void => {
    if (e.kind === 'value-chunk') raw.push(Buffer.from(e.bytes));
    else if (e.kind === 'value-end') {
      events.push({ value: Buffer.concat(raw).toString('hex') });
      raw = [];
    } else events.push(plain(e.message));
  };
  let error: unknown;
  try {
    let start = 0;
    for (const cut of [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)) {
      parser.parse(bytes.subarray(start, cut), emit);
      start = cut;
    }
    parser.parse(bytes.subarray(start), emit);
    parser.end();
  } catch (err) {
    error = err;
  }
  if (raw.length > 0) events.push({ partial: Buffer.concat(raw).toString('hex') });
  return { events, error: error === undefined ? undefined : `${(error as Error).name} ${(error as SpillwayError).code}`, raw: error };
}

describe('parser properties', () => {
  it('any conversation of valid messages, cut anywhere, parses back to exactly its messages and value bytes', () => {
    fc.assert(
      fc.property(conversationArb, fc.array(fc.nat(), { maxLength: 30 }), (conversation, cuts) => {
        const parts: Buffer[] = [];
        const expected: unknown[] = [];
        for (const { message, raw } of conversation) {
          parts.push(serialize(message));
          expected.push(plain(message));
          if (raw !== undefined) {
            parts.push(Buffer.from(raw));
            expected.push({ value: Buffer.from(raw).toString('hex') });
          }
        }
        const result = run(Buffer.concat(parts), cuts, { maxFrameBytes: 1 << 20, maxValueBytes: 1 << 20 });
        assert.equal(result.error, undefined, String(result.raw));
        assert.deepEqual(result.events, expected);
      }),
      { numRuns: 1500, seed: 424242 },
    );
  });

  it('any bytes give the same events and the same typed error whatever the chunking (one byte at a time included)', () => {
    const valid = conversationArb.map((conversation) =>
      Buffer.concat(conversation.flatMap(({ message, raw }) => (raw === undefined ? [serialize(message)] : [serialize(message), Buffer.from(raw)]))),
    );
    const mutatedValid = fc
      .tuple(valid, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 3 }))
      .map(([bytes, flips]) => {
        const out = Buffer.from(bytes);
        if (out.length > 0) for (const [at, b] of flips) out[at % out.length] = b;
        return out;
      });
    fc.assert(
      fc.property(
        fc.oneof(fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)), mutatedValid),
        fc.array(fc.nat(), { maxLength: 20 }),
        (bytes, cuts) => {
          const whole = run(bytes, []);
          if (whole.raw !== undefined) {
            assert.ok(whole.raw instanceof SpillwayError && /^SPW_ERR_[A-Z_]+$/.test(whole.raw.code), `untyped: ${String(whole.raw)}`);
          }
          const cut = run(bytes, cuts);
          assert.deepEqual(cut.events, whole.events);
          assert.equal(cut.error, whole.error);
          if (bytes.length <= 120) {
            const single = run(bytes, Array.from({ length: bytes.length }, (_, i) => i));
            assert.deepEqual(single.events, whole.events);
            assert.equal(single.error, whole.error);
          }
        },
      ),
      { numRuns: 1500, seed: 777 },
    );
  });

  it('after an error the parser stays dead: more bytes rethrow the same error and emit nothing', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 64 }), fc.uint8Array({ minLength: 1, maxLength: 64 }), (first, more) => {
        const parser = new Parser({ maxFrameBytes: 64 });
        let failure: unknown;
        try {
          parser.parse(Buffer.from(first), () => undefined);
        } catch (err) {
          failure = err;
        }
        if (failure === undefined) return;
        let emitted = 0;
        assert.throws(
          () => parser.parse(Buffer.from(more), () => emitted++),
          (err: unknown) => err === failure,
        );
        assert.equal(emitted, 0);
        assert.equal(parser.idle, false);
      }),
      { numRuns: 500, seed: 99 },
    );
  });
});
