/** `spillway worker --direct-writes` reaches the worker's store: its registration log says how it spills. */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { CliProcess } from '../../src/client/processes.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait.js';
import { logLines, scheduler } from './helpers.js';

/** The `directWrites` field of a worker's 'worker registered' log line, started with `flags`. */
async function registeredDirectWrites(t: TestContext, address: string, flags: string[]): Promise<unknown> {
  const parent = await tempDir(t, 'spillway-test-direct-');
  const args = ['worker', '--no-supervisor', '--scheduler', address, '--memory-limit', '64MiB', '--nthreads', '1', '--local-directory', parent, '--log-level', 'info', ...flags];
  const p = new CliProcess('worker', args, { SPILLWAY_TOKEN: 'test-token' }, 'pipe');
  t.after(() => p.stop(5_000));
  await p.waitForEvent('ready', 30_000);
  const registered = (): Record<string, unknown> | undefined => logLines(p.stderrTail).find((l) => l.msg === 'worker registered');
  await waitFor(() => registered() !== undefined, 'the registration log line');
  return registered()?.directWrites;
}

test('a worker spills through the page cache unless started with --direct-writes', async (t) => {
  const address = await scheduler(t);
  const [plain, direct] = await Promise.all([registeredDirectWrites(t, address, []), registeredDirectWrites(t, address, ['--direct-writes'])]);
  assert.equal(plain, false);
  assert.equal(direct, true);
});
