import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { SpillwayError } from '../../src/index.js';
import { encodeToBuffer } from '../../src/transfer/index.js';
import { DataClient, DataServer, MessageType, Parser } from '../../src/transfer/index.js';
import { serialize, serializeDataDone, serializeValue } from '../../src/transfer/serializer.js';
import { fakeServer, pattern, requestIdOf, newStore } from './helpers.js';
import { onCleanup, cleanupScope } from '../helpers/cleanup.js';

const nonce = new Uint8Array(32).fill(1);

/** A valid client conversation: hello, then a get-data. */
function clientStream(keys: string[]): Buffer {
  return Buffer.concat([
    serialize({ type: MessageType.Hello, version: 1, nonce }),
    serialize({ type: MessageType.GetData, requestId: 1, maxBytes: 1 << 20, keys }),
  ]);
}

const mutated = (base: Buffer) =>
  fc
    .tuple(fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }), fc.option(fc.nat()))
    .map(([flips, cut]) => {
      const out = Buffer.from(base);
      for (const [at, byte] of flips) out[at % out.length] = byte;
      return cut === null ? out : out.subarray(0, cut % (out.length + 1));
    });

function isTyped(err: unknown): boolean {
  return err instanceof SpillwayError && /^SPW_ERR_[A-Z_]+$/.test(err.code);
}

describe('fuzz', () => {
  it('the parser either parses or throws a typed error, for random and mutated streams', () => {
    const base = clientStream(['alpha', 'beta']);
    fc.assert(
      fc.property(fc.oneof(fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)), mutated(base)), (bytes) => {
        const parser = new Parser({ maxFrameBytes: 4096, maxValueBytes: 1 << 20 });
        try {
          parser.parse(bytes, () => undefined);
          parser.end();
        } catch (err) {
          assert.ok(isTyped(err), `untyped error: ${String(err)}`);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('a live server survives random and mutated input and keeps serving others', async (t) => {
    const store = await newStore(t);
    store.set('alpha', pattern(3000));
    const server = await DataServer.listen(store, { maxFrameBytes: 4096, handshakeTimeoutMs: 500 });
    onCleanup(t, () => server.close());
    const base = clientStream(['alpha', 'beta']);
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)), mutated(base)), async (bytes) => {
        await new Promise<void>((resolve) => {
          const socket = net.connect(server.address.port, '127.0.0.1', () => socket.end(bytes));
          socket.on('error', () => undefined);
          socket.resume();
          socket.on('close', () => resolve());
        });
      }),
      { numRuns: 80 },
    );
    const target = await newStore(t);
    const result = await new DataClient().fetch(server.address, ['alpha'], target);
    assert.deepEqual(result.fetched, ['alpha']);
    assert.deepEqual(await target.get('alpha'), pattern(3000));
    assert.ok(server.stats().protocolErrors > 0);
  });

  it('a client given mutated or truncated answers stores the exact value or nothing', async () => {
    const value = pattern(2000);
    const encoded = await encodeToBuffer(value);
    const answer = (requestId: number): Buffer =>
      Buffer.concat([serializeValue(requestId, 0, encoded.length), encoded, serializeDataDone(requestId, 1)]);
    await fc.assert(
      fc.asyncProperty(mutated(answer(1)), async (bytes) => {
        const run = cleanupScope();
        try {
          const address = await fakeServer(run, (socket, request) => {
            // Keep the requestId right half the time so mutations reach deeper.
            const out = Buffer.from(bytes);
            if (out.length >= 9 && out[0] === MessageType.Value) out.writeUInt32LE(requestIdOf(request), 5);
            socket.end(out);
          });
          const target = await newStore(run);
          try {
            await new DataClient({ idleTimeoutMs: 2000, busyRetries: 0 }).fetch(address, ['k'], target);
            if (target.has('k')) assert.deepEqual(await target.get('k'), value);
          } catch (err) {
            assert.ok(isTyped(err), `untyped error: ${String(err)}`);
            assert.equal(target.has('k'), false, 'nothing partial is stored');
          }
        } finally {
          await run.end();
        }
      }),
      { numRuns: 60 },
    );
  });
});
