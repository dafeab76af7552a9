import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import { Channel, ControlServer } from '../../src/control/index.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { AuthError, RemoteError, TransferTimeoutError } from '../../src/index.js';

async function pair(t: import('node:test').TestContext, token?: string): Promise<{ server: ControlServer; client: Channel; remote: Channel }> {
  const server = await ControlServer.listen({ token });
  t.after(() => server.close());
  const accepted = new Promise<Channel>((resolve) => server.once('channel', resolve));
  const client = await Channel.connect(server.address, { token });
  t.after(() => client.close());
  return { server, client, remote: await accepted };
}

test('requests and notifications flow both ways', async (t) => {
  const { client, remote } = await pair(t, 'secret');
  remote.handle('add', (p) => (p as { a: number; b: number }).a + (p as { a: number; b: number }).b);
  client.handle('ping', () => 'pong');
  assert.equal(await client.request('add', { a: 2, b: 3 }), 5);
  assert.equal(await remote.request('ping'), 'pong');
  const got = new Promise<unknown>((resolve) => client.handle('event', (p) => resolve(p)));
  remote.notify('event', { x: [1, 2, 3], bin: new Uint8Array([9]) });
  assert.deepEqual(await got, { x: [1, 2, 3], bin: new Uint8Array([9]) });
});

test('a failing handler rejects the request with its code; unknown methods are typed errors', async (t) => {
  const { client, remote } = await pair(t);
  remote.handle('boom', () => {
    throw new AuthError('nope');
  });
  await assert.rejects(client.request('boom'), (e: unknown) => e instanceof RemoteError && /nope/.test(e.message));
  await assert.rejects(client.request('missing'), (e: unknown) => e instanceof RemoteError && /unknown method/.test(e.message));
});

test('pending requests reject when the channel closes; the server keeps serving others', async (t) => {
  const { server, client, remote } = await pair(t);
  remote.handle('never', () => new Promise(() => undefined));
  const pending = client.request('never');
  remote.close();
  await assert.rejects(pending);
  const again = await Channel.connect(server.address);
  t.after(() => again.close());
  assert.equal(again.closed, false);
});

test('a wrong token is refused during the handshake', async (t) => {
  const server = await ControlServer.listen({ token: 'right' });
  t.after(() => server.close());
  const errors: unknown[] = [];
  server.on('channel-error', (err) => errors.push(err));
  await assert.rejects(Channel.connect(server.address, { token: 'wrong' }), AuthError);
  await assert.rejects(Channel.connect(server.address), AuthError);
});

test('garbage from a raw socket closes that connection only', async (t) => {
  const server = await ControlServer.listen();
  t.after(() => server.close());
  const failed = new Promise((resolve) => server.once('channel-error', resolve));
  const socket = net.connect(server.address.port, server.address.host);
  socket.on('error', () => undefined);
  socket.write(Buffer.from('GET / HTTP/1.1\r\n\r\n'));
  await failed;
  socket.destroy();
  const ok = await Channel.connect(server.address);
  t.after(() => ok.close());
  assert.equal(ok.closed, false);
});

test('a late answer to a request that timed out is ignored: the channel stays open', async (t) => {
  const { client, remote } = await pair(t);
  remote.handle('slow', () => sleep(150).then(() => 'late'));
  remote.handle('fast', () => 'ok');
  await assert.rejects(client.request('slow', undefined, 30), TransferTimeoutError);
  await sleep(300); // the late answer arrives
  assert.equal(client.closed, false, 'a late answer closed the channel');
  assert.equal(await client.request('fast', undefined, 2000), 'ok');
});

test('messages sent right after the handshake reach the handlers set once connect() resolves', async (t) => {
  const got: unknown[] = [];
  const server = await ControlServer.listen();
  t.after(() => server.close());
  // Sent in the 'channel' event: often in the same read as the handshake's last frame.
  server.on('channel', (c: Channel) => {
    c.notify('hello', { n: 1 });
    c.notify('hello', { n: 2 });
  });
  for (let i = 0; i < 20; i++) {
    const client = await Channel.connect(server.address);
    t.after(() => client.close());
    client.handle('hello', (p) => void got.push((p as { n: number }).n));
    client.on('unhandled', (m) => got.push(`unhandled ${String(m)}`));
  }
  for (const start = Date.now(); got.length < 40 && Date.now() - start < 10_000; ) await sleep(20);
  assert.deepEqual(got, Array.from({ length: 20 }, () => [1, 2]).flat(), 'lost, or out of order');
});

test('a handler result that msgpack cannot pack rejects the request (RemoteError), not an unhandled rejection', async (t) => {
  const { client, remote } = await pair(t);
  remote.handle('odd', () => ({ s: Symbol('x') }));
  await assert.rejects(client.request('odd', undefined, 2000), RemoteError);
  assert.equal(await client.request('odd', undefined, 2000).catch(() => 'again'), 'again');
});
