import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeToBuffer } from '../../src/transfer/index.js';
import { MiB, f64, openStore } from '../helpers/store.js';

// Each putEncoded reading a caller's source listens for the store's close on one shared
// signal: 11 and more at once made Node warn of an EventTarget memory leak.
test('many putEncoded calls reading slow sources at once raise no MaxListenersExceededWarning', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 64 * MiB });
  const bytes = await encodeToBuffer(f64(256 * 1024, 7));
  const warnings: Error[] = [];
  const onWarning = (w: Error): void => void warnings.push(w);
  process.on('warning', onWarning);
  t.after(() => process.off('warning', onWarning));
  async function* slow(): AsyncGenerator<Uint8Array[]> {
    for (let at = 0; at < bytes.byteLength; at += 64 * 1024) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      yield [bytes.subarray(at, Math.min(at + 64 * 1024, bytes.byteLength))];
    }
  }
  await Promise.all(Array.from({ length: 32 }, (_, i) => store.putEncoded(`k${i}`, slow(), bytes.byteLength)));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(store.size, 32);
  assert.deepEqual(warnings.map((w) => `${w.name}: ${w.message}`), []);
});
