import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { BusyError, DataClient, DataServer, MessageType } from '../../src/transfer/index.js';
import { serialize, serializeBusy } from '../../src/transfer/serializer.js';
import { fakeServer, pattern, requestIdOf, newStore } from './helpers.js';
import { waitFor } from '../helpers/wait.js';
import { onCleanup } from '../helpers/cleanup.js';

const MiB = 1024 * 1024;

/** A client that asks for a large value and never reads: it holds one request slot. */
function stuckClient(t: TestContext, port: number, key: string): net.Socket {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  socket.write(serialize({ type: MessageType.Hello, version: 1, nonce: new Uint8Array(32) }));
  socket.write(serialize({ type: MessageType.GetData, requestId: 1, maxBytes: 1e9, keys: [key] }));
  socket.pause();
  onCleanup(t, () => socket.destroy());
  return socket;
}

describe('busy server', () => {
  it('over the limit the server answers busy at once; the client gives up with BusyError after bounded retries', async (t) => {
    const store = await newStore(t);
    store.set('v', pattern(1000));
    const server = await DataServer.listen(store, { maxConcurrentRequests: 0, busyRetryAfterMs: 1 });
    onCleanup(t, () => server.close());
    const target = await newStore(t);
    const start = performance.now();
    await assert.rejects(
      new DataClient({ busyRetries: 3, busyBackoffMs: 5 }).fetch(server.address, ['v'], target),
      (err: unknown) => err instanceof BusyError && err.attempts === 4 && err.code === 'SPW_ERR_BUSY',
    );
    assert.ok(performance.now() - start < 1000);
    assert.equal(server.stats().busyReplies, 4);
    assert.equal(target.has('v'), false);
  });

  it("a peer's retry hint is honoured up to maxBusyBackoffMs, not beyond (a hint of ~23 days does not park the fetch)", { timeout: 10_000 }, async (t) => {
    const address = await fakeServer(t, (socket, request) => socket.write(serializeBusy(requestIdOf(request), 2_000_000_000)), { everyRequest: true });
    const target = await newStore(t);
    const start = performance.now();
    await assert.rejects(
      new DataClient({ busyRetries: 2, maxBusyBackoffMs: 100, idleTimeoutMs: 2000 }).fetch(address, ['a'], target),
      (err: unknown) => err instanceof BusyError && err.attempts === 3,
    );
    // Two waits of at most 100 ms each; generous for a loaded host, far from the hint.
    assert.ok(performance.now() - start < 5000);
  });

  it('a saturated server says busy while a slow transfer holds its slot, then serves the retry', async (t) => {
    const store = await newStore(t);
    store.set('big', pattern(64 * MiB));
    store.set('small', pattern(1000));
    const server = await DataServer.listen(store, { maxConcurrentRequests: 1 });
    onCleanup(t, () => server.close());
    const stuck = stuckClient(t, server.address.port, 'big');
    await waitFor(() => server.stats().activeRequests === 1);
    const target = await newStore(t);
    const start = performance.now();
    await assert.rejects(new DataClient({ busyRetries: 0 }).fetch(server.address, ['small'], target), BusyError);
    assert.ok(performance.now() - start < 500, 'busy is answered quickly');
    // The socket buffers are full: the server holds at most a few MiB for the stuck client.
    assert.ok(server.stats().servedFromMemoryBytes < 16 * MiB, `${server.stats().servedFromMemoryBytes}`);
    const retrying = new DataClient({ busyRetries: 50, busyBackoffMs: 10, maxBusyBackoffMs: 50 }).fetch(server.address, ['small'], target);
    setTimeout(() => stuck.destroy(), 100);
    const result = await retrying;
    assert.deepEqual(result.fetched, ['small']);
    assert.ok(server.stats().busyReplies >= 2);
    await waitFor(() => server.stats().activeRequests === 0);
  });
});
