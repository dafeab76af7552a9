import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { DataClient, DataServer, MessageType } from '../../src/transfer/index.js';
import { serialize } from '../../src/transfer/serializer.js';
import { pattern, newStore } from './helpers.js';
import { waitFor } from '../helpers/wait.js';
import { onCleanup } from '../helpers/cleanup.js';

const MiB = 1024 * 1024;

/**
 * A client that asks for a large value and never reads it, but keeps the connection
 * "active" by trickling the bytes of a frame it never finishes (slowloris).
 */
function trickler(t: TestContext, port: number, key: string, everyMs: number): { socket: net.Socket; closed: Promise<void> } {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  socket.write(serialize({ type: MessageType.Hello, version: 1, nonce: new Uint8Array(32) }));
  socket.write(serialize({ type: MessageType.GetData, requestId: 1, maxBytes: 1e12, keys: [key] }));
  // Opens a GetData frame whose 1000-byte body then arrives one byte at a time.
  socket.write(Buffer.from([MessageType.GetData, 0xe8, 0x03, 0, 0]));
  socket.pause();
  const timer = setInterval(() => socket.write(Buffer.from([0])), everyMs);
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  void closed.then(() => clearInterval(timer));
  onCleanup(t, () => {
    clearInterval(timer);
    socket.destroy();
  });
  return { socket, closed };
}

describe('slow readers', () => {
  it('a peer that stops reading is closed after idleTimeoutMs even while it trickles bytes in; the transfers it held back go on', { timeout: 20_000 }, async (t) => {
    const store = await newStore(t, { memoryLimit: '512 MiB' });
    store.set('big', pattern(48 * MiB));
    store.set('small', pattern(1000));
    // The big value takes the whole in-flight budget while it is being sent.
    const server = await DataServer.listen(store, { maxBytesInFlight: 4 * MiB, idleTimeoutMs: 1000 });
    onCleanup(t, () => server.close());
    const { closed } = trickler(t, server.address.port, 'big', 200);
    await waitFor(() => server.stats().bytesInFlight > 0);
    const target = await newStore(t);
    const start = performance.now();
    const fetched = new DataClient({ idleTimeoutMs: 15_000 }).fetch(server.address, ['small'], target);
    const outcome = await Promise.race([
      fetched.then(
        () => 'fetched',
        (err: unknown) => `the other fetch failed: ${String(err)}`,
      ),
      new Promise((r) => setTimeout(() => r('stuck'), 6000)),
    ]);
    // Before the fix: the innocent connection, waiting for budget, was the one closed as idle
    // after 1 s, while the non-reading one stayed open as long as it trickled bytes in.
    assert.equal(outcome, 'fetched', 'a non-reading peer that trickles input holds the byte budget (and so every other transfer)');
    assert.deepEqual(await target.get('small'), pattern(1000));
    assert.ok(performance.now() - start < 6000);
    await closed;
    assert.ok(server.stats().aborted >= 1);
  });
});
