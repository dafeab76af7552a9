import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { SpillwayError } from '../../src/index.js';
import { encodeToBuffer } from '../../src/transfer/index.js';
import { DataClient, MessageType } from '../../src/transfer/index.js';
import {
  serialize,
  serializeBusy,
  serializeDataDone,
  serializeMissing,
  serializeResponse,
  serializeValue,
} from '../../src/transfer/serializer.js';
import { xxh64 } from '../../src/codec/index.js';
import { fakeServer, pattern, requestIdOf, newStore } from './helpers.js';
import { cleanupScope } from '../helpers/cleanup.js';

/**
 * A hostile or confused server, frame by frame (fuzz.test.ts flips bytes of one good answer):
 * answers for other requests or keys, out of order, twice, lying value lengths, corrupt or
 * resealed-but-malformed values, Busy/DataDone at the wrong time, handshake frames again.
 * The client either stores exactly the server's values or throws a typed error and
 * stores nothing.
 */

const KEYS = ['a', 'b', 'c'];

type Step =
  | { kind: 'value'; id: 'right' | 'wrong'; index: number; key: number; lie: number; corrupt: 'none' | 'flip' | 'reseal'; at: number }
  | { kind: 'missing'; id: 'right' | 'wrong'; index: number }
  | { kind: 'done'; answered: number }
  | { kind: 'busy'; retry: number }
  | { kind: 'other'; type: 'ready' | 'hello-ok' | 'response' | 'error-0' | 'error-req' };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('value' as const),
      id: fc.constantFrom('right' as const, 'right' as const, 'wrong' as const),
      index: fc.nat({ max: 3 }),
      key: fc.nat({ max: 2 }),
      lie: fc.constantFrom(0, 0, 0, -8, 8, -1, 3, -100000),
      corrupt: fc.constantFrom('none' as const, 'none' as const, 'flip' as const, 'reseal' as const),
      at: fc.nat(),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('missing' as const), id: fc.constantFrom('right' as const, 'wrong' as const), index: fc.nat({ max: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('done' as const), answered: fc.nat({ max: 4 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('busy' as const), retry: fc.nat({ max: 5 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('other' as const), type: fc.constantFrom('ready' as const, 'hello-ok' as const, 'response' as const, 'error-0' as const, 'error-req' as const) }) },
);

/** Rewrites a value's trailer so its checksum matches again (the body stays malformed). */
function reseal(bytes: Buffer): Buffer {
  const frameCount = bytes.readUInt32LE(12);
  const headerLength = bytes.readUInt32LE(8);
  const bodyStart = Math.min(bytes.length - 8, Math.ceil((16 + 8 * frameCount + headerLength) / 8) * 8);
  const seed = xxh64(bytes.subarray(0, bodyStart), 0n);
  bytes.writeBigUInt64LE(xxh64(bytes.subarray(bodyStart, bytes.length - 8), seed), bytes.length - 8);
  return bytes;
}

function isTyped(err: unknown): boolean {
  return err instanceof SpillwayError && /^SPW_ERR_[A-Z_]+$/.test(err.code);
}

describe('a hostile server', () => {
  it('frame-level fuzz: the fetch stores exactly the values or throws a typed error and stores nothing', { timeout: 60_000 }, async () => {
    const values = [pattern(700, 1), { n: 1, s: 'two', f: new Float64Array([1, 2, 3]) }, [1, 'x', null]];
    const encoded = await Promise.all(values.map((v) => encodeToBuffer(v)));
    const outcomes = { stored: 0, refused: 0 };
    // A valid answer (each key a Value or Missing, then DataDone), then a few edits to it.
    const scriptArb = fc
      .tuple(
        fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
        fc.array(fc.tuple(fc.nat(), fc.constantFrom('replace', 'insert', 'delete'), stepArb), { maxLength: 2 }),
      )
      .map(([present, edits]) => {
        const steps: Step[] = present.map((p, i) =>
          p ? { kind: 'value', id: 'right', index: i, key: i, lie: 0, corrupt: 'none', at: 0 } : { kind: 'missing', id: 'right', index: i },
        );
        steps.push({ kind: 'done', answered: 3 });
        for (const [at, op, step] of edits) {
          const i = at % (steps.length + 1);
          if (op === 'insert') steps.splice(i, 0, step);
          else if (op === 'replace') steps.splice(i, 1, step);
          else steps.splice(i, 1);
        }
        return steps;
      });
    await fc.assert(
      fc.asyncProperty(scriptArb, fc.boolean(), fc.boolean(), async (steps, toDisk, endAfter) => {
        const run = cleanupScope();
        try {
          const address = await fakeServer(
            run,
            (socket, request) => {
              const id = requestIdOf(request);
              const out: Buffer[] = [];
              for (const step of steps) {
                const rid = 'id' in step && step.id === 'wrong' ? id + 1 : id;
                if (step.kind === 'value') {
                  let bytes: Buffer = Buffer.from(encoded[step.key]);
                  if (step.corrupt !== 'none') {
                    const at = step.at % (bytes.length - 8);
                    bytes[at] ^= 0x5a;
                    if (step.corrupt === 'reseal') bytes = reseal(bytes);
                  }
                  const declared = Math.max(0, bytes.length + step.lie);
                  out.push(serializeValue(rid, step.index, declared), declared <= bytes.length ? bytes.subarray(0, declared) : Buffer.concat([bytes, Buffer.alloc(declared - bytes.length)]));
                } else if (step.kind === 'missing') out.push(serializeMissing(rid, step.index));
                else if (step.kind === 'done') out.push(serializeDataDone(id, step.answered));
                else if (step.kind === 'busy') out.push(serializeBusy(id, step.retry));
                else if (step.type === 'ready') out.push(serialize({ type: MessageType.Ready }));
                else if (step.type === 'hello-ok') out.push(serialize({ type: MessageType.HelloOk, version: 1, authRequired: false, nonce: new Uint8Array(32), proof: new Uint8Array(32) }));
                else if (step.type === 'response') out.push(serializeResponse(id, Buffer.from([0xc0])));
                else out.push(serialize({ type: MessageType.Error, requestId: step.type === 'error-0' ? 0 : id, code: 'SPW_ERR_X', message: 'no' }));
              }
              if (endAfter) socket.end(Buffer.concat(out));
              else socket.write(Buffer.concat(out));
            },
            { everyRequest: true },
          );
          const target = await newStore(run);
          const client = new DataClient({ idleTimeoutMs: 300, busyRetries: 1, busyBackoffMs: 1, maxBusyBackoffMs: 5, diskThresholdBytes: toDisk ? 0 : undefined });
          try {
            const result = await client.fetch(address, KEYS, target);
            outcomes.stored++;
            for (const key of result.fetched) {
              const i = KEYS.indexOf(key);
              assert.ok(i >= 0);
              // What was stored is one of the server's real values, whole (never a torn or corrupt one).
              const got = await target.get(key);
              assert.ok(values.some((v) => { try { assert.deepEqual(got, v); return true; } catch { return false; } }), `stored ${key}: ${String(got)}`);
            }
          } catch (err) {
            assert.ok(isTyped(err), `untyped error: ${String(err)}`);
            outcomes.refused++;
            for (const key of KEYS) assert.equal(target.has(key), false, `nothing is stored after a failed fetch (${key})`);
            assert.equal(target.stats().disk.count, 0);
          }
        } finally {
          await run.end();
        }
      }),
      { numRuns: 80, seed: 31337 },
    );
    assert.ok(outcomes.stored > 5 && outcomes.refused > 20, JSON.stringify(outcomes));
  });
});
