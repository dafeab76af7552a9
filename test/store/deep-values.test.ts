import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CodecError } from '../../src/index.js';
import { sizeof } from '../../src/transfer/index.js';
import { checkInvariants } from '../../src/store/spill-store.js';
import { MiB, openStore } from '../helpers/store.js';

function chain(depth: number): unknown {
  let value: unknown = { leaf: 'x'.repeat(100) };
  for (let i = 0; i < depth; i++) value = { next: value, i };
  return value;
}

// sizeof walked nested objects by recursion: a value a few thousand levels deep (a linked
// list, a parsed JSON tree) overflowed the stack, and set() threw a bare RangeError.
test('set() takes a deeply nested value: no RangeError, and its size is estimated as a flat walk would', async (t) => {
  const { store } = await openStore(t, { memoryLimit: 100 * MiB });
  const errors: unknown[] = [];
  store.on('error', (err) => errors.push(err));
  const deep = chain(50_000);
  assert.doesNotThrow(() => store.set('deep', deep));
  assert.equal(await store.get('deep'), deep);
  // Sizes grow linearly with depth, deferral or not.
  const per = (sizeof(chain(2000)) - sizeof(chain(1000))) / 1000;
  assert.ok(per > 0);
  assert.equal(sizeof(chain(200)) - sizeof(chain(100)), per * 100);
  assert.equal(sizeof(deep) - sizeof(chain(49_000)), per * 1000);
  // The codec refuses it (too deep to encode): it stays in memory, reported as a CodecError.
  await store.evict();
  assert.equal(store.where('deep'), 'memory');
  assert.ok(errors.length === 1 && errors[0] instanceof CodecError, String(errors[0]));
  assert.deepEqual(store[checkInvariants](), []);
});

test('sizeof of a deep value counts shared and cyclic objects once, as before', () => {
  const shared = { payload: 'y'.repeat(1000) };
  let value: Record<string, unknown> = { shared };
  const top = value;
  for (let i = 0; i < 5000; i++) value = value.next = { shared };
  value.next = top; // a cycle back to the top
  assert.ok(sizeof(top) < 5000 * 200, 'the shared payload is counted once');
});
