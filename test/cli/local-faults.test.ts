/** `spillway local` where /proc is not readable, and its scratch folders on SIGINT. */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { CliProcess } from '../../src/client/processes.js';
import { runLocal } from '../../src/cli/local.js';
import { alive } from '../helpers/proc.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait.js';
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

for (const target of ['the process', 'its process group'] as const) {
  // A terminal's Ctrl-C signals the whole group: the scheduler and the workers too, each of
  // which takes it once, however many times its parent passes it on.
  test(`SIGINT to \`spillway local\` (${target}) leaves no scratch folder and no process behind`, async (t) => {
    const dir = await tempDir(t, 'spillway-test-local-');
    const child = spawnCli(['local', '--local-directory', dir, '--memory-limit', '64MiB', '--size', '400MiB', '--json'], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const leader = child.pid as number;
    t.after(() => void (alive(-leader) ? process.kill(-leader, 'SIGKILL') : undefined));
    const exited = once(child, 'exit');
    // Mid-run: both workers have made their folders in the cluster's, and data has begun to
    // land beside them (a spill folder).
    // Two levels by hand: a worker's folder links into node_modules, which a walk must not follow.
    const entries = async (): Promise<string[]> => {
      const clusters = await fsp.readdir(dir);
      return (await Promise.all(clusters.map((name) => fsp.readdir(path.join(dir, name)).catch(() => [])))).flat();
    };
    await waitFor(
      async () => {
        const names = await entries();
        return names.filter((name) => name.startsWith('spillway-worker-')).length >= 2 && names.some((name) => /^spillway-(?!worker-|cluster-)/.test(name));
      },
      'two workers up and a spill folder',
      60_000,
    );
    if (target === 'the process') child.kill('SIGINT');
    else process.kill(-leader, 'SIGINT');
    const [code] = (await exited) as [number | null];
    assert.equal(code, 130);
    assert.deepEqual(await fsp.readdir(dir), []);
    await waitFor(() => !alive(-leader), 'every process of the cluster gone', 10_000);
  });
}
