import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { promisify } from 'node:util';
import { SpillwayError } from '../../src/index.js';
import { AuthError, DataClient, DataServer, MessageType, Parser, type Message } from '../../src/transfer/index.js';
import { serialize } from '../../src/transfer/serializer.js';
import { pattern, newStore } from './helpers.js';
import { onCleanup } from '../helpers/cleanup.js';
import { tempDir } from '../helpers/temp-dir.js';

describe('authentication and TLS', () => {
  async function served(t: TestContext, token?: string) {
    const store = await newStore(t);
    store.set('secret', pattern(5000));
    const server = await DataServer.listen(store, { token });
    onCleanup(t, () => server.close());
    return server;
  }

  it('with the same token on both sides, data moves', async (t) => {
    const server = await served(t, 's3cret');
    const target = await newStore(t);
    await new DataClient({ token: 's3cret' }).fetch(server.address, ['secret'], target);
    assert.deepEqual(await target.get('secret'), pattern(5000));
  });

  it('a wrong token fails with AuthError and nothing is served', async (t) => {
    const server = await served(t, 's3cret');
    const target = await newStore(t);
    await assert.rejects(new DataClient({ token: 'guess' }).fetch(server.address, ['secret'], target), AuthError);
    await assert.rejects(new DataClient().fetch(server.address, ['secret'], target), AuthError);
    assert.equal(target.has('secret'), false);
    assert.equal(server.stats().valuesServed, 0);
    assert.equal(server.stats().requests, 0);
  });

  it('a client with a token refuses a server without one (no one-sided trust)', async (t) => {
    const server = await served(t);
    const target = await newStore(t);
    await assert.rejects(new DataClient({ token: 's3cret' }).fetch(server.address, ['secret'], target), AuthError);
    assert.equal(target.has('secret'), false);
  });

  it('the server answers a bad proof with an auth error, closes, and ignores requests sent after it', async (t) => {
    const server = await served(t, 's3cret');
    const messages: Message[] = [];
    await new Promise<void>((resolve) => {
      const socket = net.connect(server.address.port, '127.0.0.1');
      const parser = new Parser();
      socket.on('data', (chunk: Buffer) =>
        parser.parse(chunk, (e) => {
          if (e.kind !== 'message') return;
          messages.push(e.message);
          if (e.message.type === MessageType.HelloOk) {
            socket.write(serialize({ type: MessageType.Auth, proof: new Uint8Array(32).fill(7) }));
            socket.write(serialize({ type: MessageType.GetData, requestId: 1, maxBytes: 1e6, keys: ['secret'] }));
          }
        }),
      );
      socket.on('error', () => undefined);
      socket.on('close', () => resolve());
      socket.write(serialize({ type: MessageType.Hello, version: 1, nonce: new Uint8Array(32) }));
    });
    assert.deepEqual(
      messages.map((m) => m.type),
      [MessageType.HelloOk, MessageType.Error],
    );
    const last = messages[1];
    assert.ok(last.type === MessageType.Error && last.code === 'SPW_ERR_AUTH');
    assert.equal(server.stats().authFailures, 1);
    assert.equal(server.stats().valuesServed, 0);
  });

  it('speaks TLS when configured, and a plain client fails with a typed error', async (t) => {
    const dir = await tempDir(t);
    const key = path.join(dir, 'key.pem');
    const cert = path.join(dir, 'cert.pem');
    await promisify(execFile)('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1',
      '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1',
    ]);
    const [keyPem, certPem] = await Promise.all([fs.readFile(key), fs.readFile(cert)]);
    const store = await newStore(t);
    store.set('v', pattern(100_000));
    const server = await DataServer.listen(store, { token: 't', tls: { key: keyPem, cert: certPem } });
    onCleanup(t, () => server.close());
    const target = await newStore(t);
    await new DataClient({ token: 't', tls: { ca: certPem } }).fetch(server.address, ['v'], target);
    assert.deepEqual(await target.get('v'), pattern(100_000));
    const plain = await newStore(t);
    await assert.rejects(
      new DataClient({ token: 't', connectTimeoutMs: 2000, idleTimeoutMs: 2000 }).fetch(server.address, ['v'], plain),
      (err: unknown) => err instanceof SpillwayError,
    );
    // A TLS client that does not trust the server's certificate refuses it.
    await assert.rejects(new DataClient({ token: 't', tls: {} }).fetch(server.address, ['v'], plain), AuthError);
    assert.equal(plain.has('v'), false);
  });
});
