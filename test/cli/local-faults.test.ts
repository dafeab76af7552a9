/** `spillway local` where /proc is not readable, and its scratch folders on SIGINT. */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fsp from 'node:fs/promises';
import { test } from 'node:test';
import { CliProcess } from '../../src/client/processes.js';
import { runLocal } from '../../src/cli/local.js';
import { tempDir } from '../helpers/temp-dir.js';
import { spawnCli } from './helpers.js';

const MiB = 1024 * 1024;

test('runLocal completes where a process\'s memory cannot be read (macOS: no /proc)', async () => {
  const original = CliProcess.prototype.memory;
  // What memory() returns off Linux ("undefined elsewhere").
  CliProcess.prototype.memory = async () => undefined;
  try {
    const s = await runLocal({ workers: 1, memoryLimit: 64 * MiB, workload: 'shuffle', size: 4 * MiB, partitions: 2 });
    assert.deepEqual(s.problems, []);
    assert.equal(s.completed, true);
    assert.equal(s.verified, true);
  } finally {
    CliProcess.prototype.memory = original;
  }
});

test('SIGINT to `spillway local` leaves no scratch folder behind', async (t) => {
  const dir = await tempDir(t, 'spillway-test-local-');
  const child = spawnCli(['local', '--local-directory', dir, '--memory-limit', '64MiB', '--size', '400MiB', '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = once(child, 'exit');
  // Wait until the cluster is up and the client connected (its folder exists, or the run is on).
  const deadline = Date.now() + 30_000;
  while ((await fsp.readdir(dir)).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  await new Promise((r) => setTimeout(r, 3000));
  child.kill('SIGINT');
  const [code] = (await exited) as [number | null];
  assert.equal(code, 130);
  assert.deepEqual(await fsp.readdir(dir), []);
});
