import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { SpillStore } from '../../src/index.js';
import { MiB, filesUnder } from '../helpers/store.js';
import { onCleanup } from '../helpers/cleanup.js';
import { tempDir } from '../helpers/temp-dir.js';
import { OWNER_FILE } from '../../src/folders/owner.js';

const strangeKeys = ['../../x', 'a/b', '/etc/passwd', '\u0000', '', '.', '..', 'C:\\\\win', 'ключ', '🙂'.repeat(10), 'x'.repeat(1024 * 1024)];

test('any string is a valid key, and no file name comes from a key', async (t) => {
  const parent = await tempDir(t);
  const inner = path.join(parent, 'inner');
  const store = await SpillStore.open({ memoryLimit: 64 * MiB, monitorIntervalMs: 0, directory: inner });
  onCleanup(t, () => store.close());
  strangeKeys.forEach((key, i) => store.set(key, { i, key: key.slice(0, 10) }));
  await store.evict();
  for (const key of strangeKeys) assert.equal(store.where(key), 'disk');
  const files = await filesUnder(parent);
  assert.ok(files.length >= 1);
  for (const file of files) {
    assert.ok(file.startsWith(inner + path.sep), `${file} is inside the store's directory`);
    // Names are the store's own ids (one file per value, or shared segment files).
    assert.match(path.relative(inner, file), /^spillway-[\w]+\/[\w.-]+$/);
  }
  for (const [i, key] of strangeKeys.entries()) assert.deepEqual(await store.get(key), { i, key: key.slice(0, 10) });
});

test('two stores can share a parent directory without touching each other', async (t) => {
  const parent = await tempDir(t);
  const a = await SpillStore.open({ memoryLimit: 64 * MiB, monitorIntervalMs: 0, directory: parent });
  const b = await SpillStore.open({ memoryLimit: 64 * MiB, monitorIntervalMs: 0, directory: parent });
  a.set('k', 'from a');
  b.set('k', 'from b');
  await a.evict();
  await b.evict();
  assert.equal((await fsp.readdir(parent)).length, 2);
  await a.close();
  assert.equal((await fsp.readdir(parent)).length, 1);
  assert.equal(await b.get('k'), 'from b');
  await b.close();
  assert.deepEqual(await fsp.readdir(parent), []);
});

test('the default directory is a fresh folder under the OS temp dir, removed on close', async () => {
  const store = await SpillStore.open({ memoryLimit: 64 * MiB, monitorIntervalMs: 0 });
  store.set('k', 'v');
  await store.evict();
  const dir = (store.tiers[0] as unknown as { directory: string }).directory;
  assert.ok(dir.includes('spillway-'));
  // The spilled value and the owner file (src/folders).
  assert.deepEqual((await fsp.readdir(dir)).filter((name) => name !== OWNER_FILE).length, 1);
  assert.ok((await fsp.readdir(dir)).includes(OWNER_FILE));
  await store.close();
  await assert.rejects(fsp.access(dir));
});
