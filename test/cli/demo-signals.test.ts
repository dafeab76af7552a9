/** Ctrl-C on `spillway demo` must not leave its spill files behind. */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { tempDir } from '../helpers/temp-dir.js';
import { spawnCli } from './helpers.js';


async function du(dir: string): Promise<number> {
  let n = 0;
  for (const e of await fsp.readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) n += (await fsp.stat(path.join(e.parentPath ?? e.path, e.name)).catch(() => ({ size: 0 }))).size;
  }
  return n;
}

test('SIGINT to `spillway demo` removes its spill folder', async (t) => {
  const dir = await tempDir(t, 'spillway-test-demo-');
  const child = spawnCli(['demo', '--directory', dir, '--memory-limit', '32MiB', '--data', '1GiB', '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = once(child, 'exit');
  const deadline = Date.now() + 30_000;
  while ((await du(dir)) < 32 * 2 ** 20 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  assert.ok((await du(dir)) > 0, 'the demo spilled');
  child.kill('SIGINT');
  await exited;
  assert.deepEqual(await fsp.readdir(dir), []);
});
