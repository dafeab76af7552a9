import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { pack } from 'msgpackr';
import { Channel, ControlServer } from '../../src/control/index.js';
import { SpillwayError } from '../../src/index.js';
import { type Message, MessageType, Parser, ProtocolError } from '../../src/transfer/index.js';
import { serialize, serializeRequest, serializeResponse } from '../../src/transfer/serializer.js';

/**
 * The control channel from the other side of the socket: raw bytes in, frames out. A bad
 * frame gets a typed error and closes that channel only; nothing from an unauthenticated
 * peer is buffered beyond a frame header.
 */

const nonce = new Uint8Array(32).fill(7);
const hello = serialize({ type: MessageType.Hello, version: 1, nonce });

function isTyped(err: unknown): boolean {
  return err instanceof SpillwayError && /^SPW_ERR_[A-Z_]+$/.test(err.code);
}

/** A hand-driven control peer (no token): completes the handshake, then lets `onRequest` answer. */
async function fakeControlServer(t: import('node:test').TestContext, onRequest: (socket: net.Socket, requestId: number) => void) {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    const parser = new Parser();
    socket.on('data', (chunk: Buffer) =>
      parser.parse(chunk, (e) => {
        if (e.kind !== 'message') return;
        if (e.message.type === MessageType.Hello) {
          const ok = serialize({ type: MessageType.HelloOk, version: 1, authRequired: false, nonce, proof: new Uint8Array(32) });
          socket.write(Buffer.concat([ok, serialize({ type: MessageType.Ready })]));
        } else if (e.message.type === MessageType.Request) {
          onRequest(socket, e.message.requestId);
        }
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise((resolve) => server.close(resolve));
  });
  return { host: '127.0.0.1', port: (server.address() as net.AddressInfo).port };
}

/** Writes `bytes` to the server, collects its frames until it closes or `ms` pass. */
function converse(port: number, bytes: Buffer | Buffer[], ms = 2000): Promise<{ messages: Message[]; closed: boolean }> {
  return new Promise((resolve) => {
    const messages: Message[] = [];
    const parser = new Parser();
    const socket = net.connect(port, '127.0.0.1', () => {
      for (const b of Array.isArray(bytes) ? bytes : [bytes]) socket.write(b);
    });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ messages, closed: false });
    }, ms);
    socket.on('data', (chunk: Buffer) => {
      try {
        parser.parse(chunk, (e) => e.kind === 'message' && messages.push(e.message));
      } catch {
        socket.destroy();
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ messages, closed: true });
    });
  });
}

test('a Response body that is not msgpack rejects the request with ProtocolError (it hung) and closes the channel with it', { timeout: 20_000 }, async (t) => {
  for (const body of [Buffer.from([0x92, 0x01]), Buffer.alloc(0), Buffer.from([0xdd, 0xff, 0xff, 0xff, 0xff])]) {
    const address = await fakeControlServer(t, (socket, id) => socket.write(serializeResponse(id, body)));
    const client = await Channel.connect(address);
    t.after(() => client.close());
    const closed = new Promise<unknown>((resolve) => client.once('close', resolve));
    const outcome = await Promise.race([
      client.request('anything').then(
        () => 'resolved',
        (err: unknown) => err,
      ),
      sleep(2000).then(() => 'hung'),
    ]);
    assert.ok(outcome instanceof ProtocolError, `request outcome for ${body.toString('hex')}: ${String(outcome)}`);
    assert.ok((await closed) instanceof ProtocolError, 'the channel closes with a typed error');
  }
});

test('a Request body that is not msgpack closes that channel with ProtocolError; the server keeps serving others', async (t) => {
  const server = await ControlServer.listen();
  t.after(() => server.close());
  server.on('channel', (c: Channel) => c.handle('add', (p) => (p as number[])[0] + (p as number[])[1]));
  const accepted = new Promise<Channel>((resolve) => server.once('channel', resolve));
  const { messages, closed } = await converse(server.address.port, [hello, serializeRequest(1, Buffer.from([0x82, 0xa1]))]);
  assert.equal(closed, true);
  assert.equal(messages.at(-1)?.type, MessageType.Ready);
  const remote = await accepted;
  if (!remote.closed) await new Promise((resolve) => remote.once('close', resolve));
  const reason = await new Promise<unknown>((resolve) => {
    // 'close' already fired; ask a fresh channel the same way and catch its reason.
    server.once('channel', (c: Channel) => c.once('close', resolve));
    void converse(server.address.port, [hello, serializeRequest(1, Buffer.from([0x91, 0x01, 0x02]))]);
  });
  assert.ok(reason instanceof ProtocolError, `close reason: ${String(reason)}`);
  const client = await Channel.connect(server.address);
  t.after(() => client.close());
  assert.equal(await client.request('add', [2, 3], 2000), 5);
});

test('before the handshake, a frame of any other type is refused on its header: no body is buffered for an unauthenticated peer', async (t) => {
  for (const token of ['secret', undefined]) {
    const server = await ControlServer.listen({ token });
    t.after(() => server.close());
    const errors: unknown[] = [];
    server.on('channel-error', (err) => errors.push(err));
    // A Request header declaring 60 MiB (under the 64 MiB default frame limit), then 1 KiB of its body.
    const header = Buffer.from([MessageType.Request, 0, 0, 0, 0]);
    header.writeUInt32LE(60 << 20, 1);
    const start = performance.now();
    const { closed } = await converse(server.address.port, [header, Buffer.alloc(1024)], 1500);
    assert.equal(closed, true, `token ${String(token)}: the connection stays open waiting for a 60 MiB body`);
    assert.ok(performance.now() - start < 1000);
    assert.ok(errors.every(isTyped));
  }
  // With a token, after Hello only Auth is taken: a Request cannot ride in before it.
  const server = await ControlServer.listen({ token: 'secret' });
  t.after(() => server.close());
  const header = Buffer.from([MessageType.Request, 0, 0, 0, 0]);
  header.writeUInt32LE(60 << 20, 1);
  const { closed } = await converse(server.address.port, [hello, header], 1500);
  assert.equal(closed, true, 'a Request header after Hello, before Auth, is refused at once');
});

test('a valid conversation split at every byte boundary is understood', async (t) => {
  const server = await ControlServer.listen();
  t.after(() => server.close());
  server.on('channel', (c: Channel) => c.handle('echo', (p) => p));
  const stream = Buffer.concat([hello, serializeRequest(1, pack({ m: 'echo', p: 'hi' }))]);
  for (let cut = 1; cut < stream.length; cut++) {
    const { messages } = await new Promise<{ messages: Message[] }>((resolve) => {
      const messages: Message[] = [];
      const parser = new Parser();
      const socket = net.connect(server.address.port, '127.0.0.1', async () => {
        socket.setNoDelay(true);
        socket.write(stream.subarray(0, cut));
        await sleep(2);
        socket.write(stream.subarray(cut));
      });
      socket.on('error', () => undefined);
      socket.on('data', (chunk: Buffer) =>
        parser.parse(chunk, (e) => {
          if (e.kind !== 'message') return;
          messages.push(e.message);
          if (e.message.type === MessageType.Response || e.message.type === MessageType.Error) {
            socket.destroy();
            resolve({ messages });
          }
        }),
      );
    });
    const last = messages.at(-1);
    assert.ok(last?.type === MessageType.Response && last.requestId === 1, `cut at ${cut}: ${JSON.stringify(last)}`);
  }
});

test('fuzz: random and mutated streams get typed errors only; the server keeps serving', async (t) => {
  const server = await ControlServer.listen({ maxFrameBytes: 4096, timeoutMs: 150 });
  t.after(() => server.close());
  const errors: unknown[] = [];
  server.on('channel-error', (err) => errors.push(err));
  server.on('channel', (c: Channel) => {
    c.handle('echo', (p) => p);
    c.on('close', (err?: Error) => err !== undefined && errors.push(err));
  });
  const base = Buffer.concat([hello, serializeRequest(1, pack({ m: 'echo', p: [1, 'two'] })), serializeRequest(0, pack({ m: 'note' }))]);
  const mutated = fc
    .tuple(fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }), fc.option(fc.nat()))
    .map(([flips, cut]) => {
      const out = Buffer.from(base);
      for (const [at, byte] of flips) out[at % out.length] = byte;
      return cut === null ? out : out.subarray(0, cut % (out.length + 1));
    });
  await fc.assert(
    fc.asyncProperty(fc.oneof(fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)), mutated), async (bytes) => {
      await converse(server.address.port, bytes, 200);
    }),
    { numRuns: 60, seed: 20240601 },
  );
  await sleep(50);
  const untyped = errors.filter((e) => !isTyped(e));
  assert.deepEqual(untyped.map(String), [], 'every channel error is a typed SpillwayError');
  const client = await Channel.connect(server.address);
  t.after(() => client.close());
  assert.deepEqual(await client.request('echo', { ok: true }, 2000), { ok: true });
});
