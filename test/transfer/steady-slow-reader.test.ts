import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it } from 'node:test';
import { DataServer, MessageType } from '../../src/transfer/index.js';
import { serialize } from '../../src/transfer/serializer.js';
import { pattern, newStore } from './helpers.js';
import { onCleanup } from '../helpers/cleanup.js';

const MiB = 1024 * 1024;

describe('steady slow readers', () => {
  // docs/protocol.md: the server closes a peer that makes no write progress for idleTimeoutMs.
  // A peer reading all the time, only slower than one piece of the value can be sent in that
  // time, makes progress every few milliseconds and must get the whole value. The server sees
  // progress a piece (256 KiB) at a time, and a reader on a loaded machine may take 64 KiB in
  // 200 ms: the window is long enough for several such reads, far shorter than the whole value takes
  // (a server handing the value over in one write would still be caught).
  it('a peer that reads steadily (a chunk every 10 ms) is not closed as "not reading"', { timeout: 60_000 }, async (t) => {
    const store = await newStore(t, { memoryLimit: '256 MiB' });
    const size = 32 * MiB;
    store.set('big', pattern(size));
    const server = await DataServer.listen(store, { idleTimeoutMs: 2_000 });
    onCleanup(t, () => server.close());
    const socket = net.connect(server.address.port, '127.0.0.1');
    onCleanup(t, () => socket.destroy());
    socket.on('error', () => undefined);
    let received = 0;
    let lastGap = 0;
    let last = performance.now();
    socket.on('data', (chunk: Buffer) => {
      received += chunk.byteLength;
      const now = performance.now();
      lastGap = Math.max(lastGap, now - last);
      last = now;
      // Reads on, a little at a time (a busy consumer, a slow link).
      socket.pause();
      setTimeout(() => socket.resume(), 10);
    });
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write(serialize({ type: MessageType.Hello, version: 1, nonce: new Uint8Array(32) }));
    socket.write(serialize({ type: MessageType.GetData, requestId: 1, maxBytes: 1e12, keys: ['big'] }));
    let isClosed = false;
    void closed.then(() => (isClosed = true));
    while (received < size && !isClosed) await new Promise((resolve) => setTimeout(resolve, 20));
    // (Closed once it has all: the server then is idle itself, and may close.)
    assert.ok(received >= size, `closed after ${received} of ${size}+ bytes, the longest gap between reads ${lastGap.toFixed(0)} ms`);
  });
});
