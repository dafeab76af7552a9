import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { ChecksumError, FormatError } from '../../src/index.js';
import { encodeToBuffer } from '../../src/transfer/index.js';
import {
  DataClient,
  DataServer,
  FrameTooLargeError,
  type Message,
  MessageType,
  Parser,
  ProtocolError,
  TransferError,
} from '../../src/transfer/index.js';
import { serialize, serializeDataDone, serializeResponse, serializeValue } from '../../src/transfer/serializer.js';
import { fakeServer, pattern, requestIdOf, newStore } from './helpers.js';
import { onCleanup } from '../helpers/cleanup.js';

/** Sends `bytes` to the server and collects what it answers until it closes. */
function converse(port: number, bytes: Buffer): Promise<Message[]> {
  return new Promise((resolve) => {
    const messages: Message[] = [];
    const parser = new Parser();
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
    socket.on('data', (chunk: Buffer) => parser.parse(chunk, (e) => e.kind === 'message' && messages.push(e.message)));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(messages));
  });
}

const hello = serialize({ type: MessageType.Hello, version: 1, nonce: new Uint8Array(32) });

function errorCodeOf(messages: Message[]): string | undefined {
  const last = messages.at(-1);
  return last?.type === MessageType.Error ? last.code : undefined;
}

describe('bad input', () => {
  describe('at the server', () => {
    it('closes a connection declaring an oversized frame, without allocating it, and serves others', async (t) => {
      const store = await newStore(t);
      store.set('k', pattern(100));
      // A 1 GiB frame limit: the declared size is allowed, so only incremental buffering keeps memory flat.
      const server = await DataServer.listen(store, { maxFrameBytes: 1 << 30, handshakeTimeoutMs: 300 });
      onCleanup(t, () => server.close());
      const before = process.memoryUsage().arrayBuffers;
      const header = Buffer.from([MessageType.GetData, 0, 0, 0, 0x40]); // declares 1 GiB
      const socket = net.connect(server.address.port, '127.0.0.1', () => socket.write(Buffer.concat([hello, header])));
      socket.on('error', () => undefined);
      onCleanup(t, () => socket.destroy());
      await new Promise((r) => setTimeout(r, 50));
      assert.ok(process.memoryUsage().arrayBuffers - before < 8 << 20, 'the declared size was not allocated');
      const tooBig = Buffer.from([MessageType.GetData, 0xff, 0xff, 0xff, 0xff]);
      const small = await DataServer.listen(store);
      onCleanup(t, () => small.close());
      assert.equal(errorCodeOf(await converse(small.address.port, Buffer.concat([hello, tooBig]))), 'SPW_ERR_FRAME_TOO_LARGE');
      const target = await newStore(t);
      await new DataClient().fetch(server.address, ['k'], target);
      assert.deepEqual(await target.get('k'), pattern(100));
    });

    it('refuses, on its header, a frame the handshake does not expect: a peer that has not authenticated cannot make it buffer a body', async (t) => {
      const store = await newStore(t);
      store.set('k', pattern(100));
      const server = await DataServer.listen(store, { token: 'secret', handshakeTimeoutMs: 5000 });
      onCleanup(t, () => server.close());
      // No Hello: a GetData header declaring 16 MiB (the default frame limit), then 8 MiB of its body.
      const header = Buffer.from([MessageType.GetData, 0, 0, 0, 0]);
      header.writeUInt32LE(16 << 20, 1);
      const start = performance.now();
      const messages = await converse(server.address.port, Buffer.concat([header, Buffer.alloc(8 << 20)]));
      assert.equal(errorCodeOf(messages), 'SPW_ERR_PROTOCOL');
      assert.ok(performance.now() - start < 4000, 'closed at once, not at the handshake timeout');
      // Nor a second Hello once it has answered one (the token handshake expects Auth).
      const twice = await converse(server.address.port, Buffer.concat([hello, hello]));
      assert.equal(errorCodeOf(twice), 'SPW_ERR_PROTOCOL');
      const target = await newStore(t);
      await new DataClient({ token: 'secret' }).fetch(server.address, ['k'], target);
      assert.deepEqual(await target.get('k'), pattern(100));
    });

    it('answers an unknown type, a request before the handshake, and a bad version with typed errors', async (t) => {
      const store = await newStore(t);
      const server = await DataServer.listen(store);
      onCleanup(t, () => server.close());
      assert.equal(errorCodeOf(await converse(server.address.port, Buffer.concat([hello, Buffer.from([0x55, 0, 0, 0, 0])]))), 'SPW_ERR_PROTOCOL');
      const early = serialize({ type: MessageType.GetData, requestId: 1, maxBytes: 1, keys: ['k'] });
      assert.equal(errorCodeOf(await converse(server.address.port, early)), 'SPW_ERR_PROTOCOL');
      const v2 = serialize({ type: MessageType.Hello, version: 2, nonce: new Uint8Array(32) });
      assert.equal(errorCodeOf(await converse(server.address.port, v2)), 'SPW_ERR_PROTOCOL_VERSION');
      assert.equal(server.stats().protocolErrors, 2);
    });
  });

  describe('at the client', () => {
    const good = pattern(3000);

    async function fetchFrom(t: TestContext, script: (socket: net.Socket, request: Buffer) => void, options = {}) {
      const address = await fakeServer(t, script);
      const target = await newStore(t);
      const fetching = new DataClient({ busyRetries: 0, idleTimeoutMs: 2000, ...options }).fetch(address, ['a', 'b'], target);
      return { fetching, target };
    }

    for (const [name, options] of [
      ['memory', {}],
      ['disk', { diskThresholdBytes: 0 }],
    ] as const) {
      it(`a corrupt value fails with ChecksumError and the store is left unchanged (${name})`, async (t) => {
        const encoded = await encodeToBuffer(good);
        const corrupt = Buffer.from(encoded);
        corrupt[encoded.length - 100] ^= 1;
        const { fetching, target } = await fetchFrom(t, (socket, request) => {
          const id = requestIdOf(request);
          socket.write(Buffer.concat([serializeValue(id, 0, encoded.length), encoded]));
          socket.write(Buffer.concat([serializeValue(id, 1, corrupt.length), corrupt, serializeDataDone(id, 2)]));
        }, options);
        await assert.rejects(fetching, ChecksumError);
        assert.equal(target.has('a'), false, 'the good value of the same fetch is rolled back');
        assert.equal(target.has('b'), false);
        assert.equal(target.stats().disk.count, 0);
      });
    }

    it('a truncated stream fails with TransferError and stores nothing', async (t) => {
      const encoded = await encodeToBuffer(good);
      const { fetching, target } = await fetchFrom(t, (socket, request) => {
        socket.end(Buffer.concat([serializeValue(requestIdOf(request), 0, encoded.length), encoded.subarray(0, 1000)]));
      });
      await assert.rejects(fetching, TransferError);
      assert.equal(target.has('a'), false);
    });

    it('a declared value above maxValueBytes fails before anything is allocated', async (t) => {
      const { fetching, target } = await fetchFrom(t, 
        (socket, request) => socket.write(serializeValue(requestIdOf(request), 0, 2 ** 40)),
        { maxValueBytes: 1 << 20 },
      );
      await assert.rejects(fetching, FrameTooLargeError);
      assert.equal(target.has('a'), false);
    });

    it('an unknown message type, an out-of-order answer and a lying length are typed errors', async (t) => {
      const encoded = await encodeToBuffer(good);
      const cases: Array<[(socket: net.Socket, request: Buffer) => void, new (...args: never[]) => Error]> = [
        [(s) => s.write(Buffer.from([0x66, 0, 0, 0, 0])), ProtocolError],
        [(s, r) => s.write(serializeValue(requestIdOf(r), 1, encoded.length)), ProtocolError],
        [(s, r) => s.write(serializeValue(requestIdOf(r) + 1, 0, encoded.length)), ProtocolError],
        [(s, r) => s.write(Buffer.concat([serializeValue(requestIdOf(r), 0, encoded.length + 8), encoded, Buffer.alloc(8)])), FormatError],
        [(s, r) => s.write(serializeDataDone(requestIdOf(r), 5)), ProtocolError],
      ];
      for (const [script, type] of cases) {
        const { fetching, target } = await fetchFrom(t, script);
        await assert.rejects(fetching, type);
        assert.equal(target.has('a'), false);
      }
    });

    it('a DataDone that answers none of the keys is a ProtocolError, not the same request again forever', { timeout: 10_000 }, async (t) => {
      let requests = 0;
      const address = await fakeServer(t,
        (socket, request) => {
          requests++;
          socket.write(serializeDataDone(requestIdOf(request), 0));
        },
        { everyRequest: true },
      );
      const target = await newStore(t);
      await assert.rejects(new DataClient({ idleTimeoutMs: 2000 }).fetch(address, ['a', 'b'], target), ProtocolError);
      assert.equal(requests, 1);
      assert.equal(target.has('a'), false);
    });

    for (const [name, body] of [
      ['truncated msgpack', Buffer.from([0x92, 0x01])],
      ['an empty body', Buffer.alloc(0)],
      ['a FrameRef extension outside a value', Buffer.from([0xd5, 0x53, 0x92, 0x00])],
    ] as const) {
      it(`a Response body that is not msgpack is a ProtocolError (${name})`, { timeout: 10_000 }, async (t) => {
        const address = await fakeServer(t, (socket, request) => socket.write(serializeResponse(requestIdOf(request), body)));
        await assert.rejects(new DataClient({ idleTimeoutMs: 2000 }).request(address, { op: 'ping' }), ProtocolError);
      });
    }
  });
});
