import net from 'node:net';
import { SpillStore } from '../../src/index.js';
import type { SpillStoreOptions } from '../../src/store/options.js';
import { newNonce, ZERO_PROOF } from '../../src/transfer/auth.js';
import { PROTOCOL_VERSION } from '../../src/transfer/messages.js';
import { serializeHelloOk, serializeReady } from '../../src/transfer/serializer.js';
import { type CleanupOwner, onCleanup } from '../helpers/cleanup.js';
import { tempDir } from '../helpers/temp-dir.js';

/** A store in a fresh folder (256 MiB, no RSS monitor), closed when the test or scope ends. */
export async function newStore(owner: CleanupOwner, options: SpillStoreOptions = {}): Promise<SpillStore> {
  const directory = await tempDir(owner, 'spw-transfer-test-');
  const store = await SpillStore.open({ memoryLimit: '256 MiB', monitorIntervalMs: 0, directory, ...options });
  onCleanup(owner, () => store.close());
  return store;
}

/** Bytes of a deterministic pattern (cheap to check). */
export function pattern(bytes: number, seed = 1): Buffer {
  const out = Buffer.allocUnsafe(bytes);
  for (let i = 0; i < bytes; i += 4096) out[i] = (i / 4096 + seed) & 0xff;
  // Fill fast: repeat a 4 KiB stripe of varying bytes.
  const stripe = Buffer.alloc(Math.min(4096, bytes));
  for (let i = 0; i < stripe.length; i++) stripe[i] = (i * 31 + seed) & 0xff;
  for (let i = 0; i < bytes; i += stripe.length) stripe.copy(out, i, 0, Math.min(stripe.length, bytes - i));
  return out;
}

/**
 * A hand-driven server for the client's bad-input tests: completes the handshake (no
 * token), then lets `script` write whatever bytes it likes after the client's first
 * request (with `everyRequest`, after each of them: for clients that ask again).
 */
export async function fakeServer(
  owner: CleanupOwner,
  script: (socket: net.Socket, request: Buffer) => void,
  { everyRequest = false } = {},
): Promise<{ host: string; port: number }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    let received = Buffer.alloc(0);
    let stage = 0;
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (stage === 0 && received.length >= 5 + 38) {
        stage = 1;
        received = received.subarray(5 + 38);
        socket.write(serializeHelloOk(PROTOCOL_VERSION, false, newNonce(), ZERO_PROOF));
        socket.write(serializeReady());
      }
      while (stage === 1 && received.length >= 5 && received.length >= 5 + received.readUInt32LE(1)) {
        const length = 5 + received.readUInt32LE(1);
        if (!everyRequest) stage = 2;
        script(socket, everyRequest ? received.subarray(0, length) : received);
        received = received.subarray(length);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(
    owner,
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  const address = server.address() as net.AddressInfo;
  return { host: '127.0.0.1', port: address.port };
}

/** The requestId of a GetData frame (for scripted answers). */
export function requestIdOf(frame: Buffer): number {
  return frame.readUInt32LE(5);
}

/**
 * The store as the client sees it, with a hook on the bytes of each incoming disk value
 * (to act mid-transfer: kill the peer, delete the key on the server...): called before the
 * value's first batch is read (`received` 0) and after each batch. A promise it returns
 * holds the reading back until it settles (a slow disk).
 */
export function watchIncoming(
  store: SpillStore,
  onBatch: (key: string, received: number) => void | Promise<void>,
): import('../../src/transfer/index.js').ReceivingStore {
  return {
    get memoryLimit() {
      return store.memoryLimit;
    },
    get paused() {
      return store.paused;
    },
    isAboveTarget: () => store.isAboveTarget(),
    has: (key) => store.has(key),
    set: (key, value, options) => store.set(key, value, options),
    delete: (key) => store.delete(key),
    putEncoded: (key, source, byteLength) => {
      if (source instanceof Uint8Array) return store.putEncoded(key, source, byteLength);
      async function* watched(): AsyncGenerator<readonly Uint8Array[]> {
        let received = 0;
        await onBatch(key, received);
        for await (const batch of source as AsyncIterable<readonly Uint8Array[]>) {
          for (const piece of batch) received += piece.byteLength;
          await onBatch(key, received);
          yield batch;
        }
      }
      return store.putEncoded(key, watched(), byteLength);
    },
  };
}
