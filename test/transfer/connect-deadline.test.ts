/** A peer that accepts connections but never answers (frozen): the handshake has a deadline, and a fetch can be abandoned. */
import assert from 'node:assert/strict';
import net from 'node:net';
import { type TestContext, test } from 'node:test';
import { SpillStore } from '../../src/store/spill-store.js';
import { DataClient, TransferError, TransferTimeoutError } from '../../src/transfer/index.js';

/** A listening socket whose connections are accepted (as a stopped process's kernel does) and never answered. */
async function silentPeer(t: TestContext): Promise<{ host: string; port: number }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  return { host: '127.0.0.1', port: (server.address() as net.AddressInfo).port };
}

async function store(t: TestContext): Promise<SpillStore> {
  const s = await SpillStore.open({ memoryLimit: '16 MiB', monitorIntervalMs: false });
  t.after(() => s.close());
  return s;
}

test('a peer that never completes the handshake fails the fetch with SPW_ERR_TIMEOUT after connectTimeoutMs', async (t) => {
  const peer = await silentPeer(t);
  const client = new DataClient({ connectTimeoutMs: 300 });
  const started = performance.now();
  await assert.rejects(client.fetch(peer, ['x'], await store(t)), (err: unknown) => {
    assert.ok(err instanceof TransferTimeoutError, String(err));
    assert.equal(err.code, 'SPW_ERR_TIMEOUT');
    assert.match(err.message, /handshake/);
    return true;
  });
  const ms = performance.now() - started;
  assert.ok(ms >= 250 && ms < 10_000, `failed after ${ms} ms`);
});

test('the default deadline is a few seconds, not the 60 s idle timeout', async (t) => {
  const peer = await silentPeer(t);
  const started = performance.now();
  await assert.rejects(new DataClient().fetch(peer, ['x'], await store(t)), TransferTimeoutError);
  const ms = performance.now() - started;
  assert.ok(ms >= 4_500 && ms < 15_000, `failed after ${ms} ms`);
});

test('aborting the signal abandons a fetch waiting on a frozen peer, with a TransferError', async (t) => {
  const peer = await silentPeer(t);
  const controller = new AbortController();
  const fetching = new DataClient({ connectTimeoutMs: 60_000 }).fetch(peer, ['x'], await store(t), { signal: controller.signal });
  setTimeout(() => controller.abort(new Error('the scheduler removed this worker')), 100);
  await assert.rejects(fetching, (err: unknown) => {
    assert.ok(err instanceof TransferError && !(err instanceof TransferTimeoutError), String(err));
    assert.match(err.message, /abandoned: the scheduler removed this worker/);
    return true;
  });
});

test('connectTimeoutMs must be a positive number', () => {
  assert.throws(() => new DataClient({ connectTimeoutMs: 0 }), { code: 'SPW_ERR_INVALID_ARG' });
  assert.throws(() => new DataClient({ connectTimeoutMs: Number.NaN }), { code: 'SPW_ERR_INVALID_ARG' });
});
