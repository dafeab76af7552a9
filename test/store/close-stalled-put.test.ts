import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClosedError } from '../../src/index.js';
import { encodeToBuffer } from '../../src/transfer/index.js';
import { MiB, f64, filesUnder, openStore } from '../helpers/store.js';

function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timed out'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timed out'>((resolve) => (timer = setTimeout(() => resolve('timed out'), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// close() waited for every write in flight, and a putEncoded write waits for its source:
// a source that stalls (a peer that stopped sending without closing) held close() forever.
test('close() does not wait for a putEncoded whose source stalls: the put rejects ClosedError, nothing is left', async (t) => {
  const { store, dir } = await openStore(t, { memoryLimit: 10 * MiB });
  const bytes = await encodeToBuffer(f64(2 * MiB, 4));
  let returned = false;
  const stalled: AsyncIterable<Uint8Array[]> = {
    [Symbol.asyncIterator]() {
      let sent = false;
      return {
        next: () => {
          if (sent) return new Promise<IteratorResult<Uint8Array[]>>(() => undefined);
          sent = true;
          return Promise.resolve({ done: false, value: [bytes.subarray(0, 64 * 1024)] });
        },
        return: () => {
          returned = true;
          return Promise.resolve({ done: true, value: undefined });
        },
      };
    },
  };
  const put = store.putEncoded('k', stalled, bytes.byteLength);
  put.catch(() => undefined);
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.equal(await within(store.close(), 3000), undefined, 'close() resolves');
  await assert.rejects(put, ClosedError);
  assert.equal(returned, true, 'the source is told it is no longer read');
  assert.equal(store.has('k'), false);
  assert.deepEqual(await filesUnder(dir), []);
});

test('a putEncoded source that finishes normally is unaffected by the close guard', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 10 * MiB });
  const bytes = await encodeToBuffer(f64(2 * MiB, 5));
  async function* slices(): AsyncGenerator<Uint8Array[]> {
    for (let i = 0; i < bytes.byteLength; i += 100_000) yield [bytes.subarray(i, i + 100_000)];
  }
  await store.putEncoded('k', slices(), bytes.byteLength);
  assert.deepEqual(await store.get('k'), f64(2 * MiB, 5));
});
