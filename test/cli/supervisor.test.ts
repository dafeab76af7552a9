/** `spillway worker` as a supervisor, with real processes: its workers share the host's memory and go when it is told to. */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { CliProcess } from '../../src/client/processes.js';
import { v8HelperThreads } from '../../src/runtime/tuned-environment.js';
import { hostMemory } from '../../src/worker/memory-limit.js';
import { waitFor } from '../helpers/wait.js';

test('spillway worker --nworkers 2 --memory-limit auto: two workers, each with half the host\'s memory; SIGTERM retires both and the supervisor exits 0', async (t) => {
  const env = { SPILLWAY_TOKEN: 'test-token' };
  const scheduler = new CliProcess('scheduler', ['scheduler', '--port', '0'], env, 'pipe');
  t.after(() => scheduler.stop(5_000));
  const { address } = (await scheduler.waitForEvent('listening', 30_000)) as { address: { host: string; port: number } };

  const supervisor = new CliProcess('supervisor', ['worker', '--scheduler', `${address.host}:${address.port}`, '--memory-limit', 'auto', '--nworkers', '2', '--nthreads', '1', '--name', 'shared'], env, 'pipe');
  t.after(() => supervisor.stop(5_000));
  const ready: Record<string, unknown>[] = [];
  supervisor.onEvent = (event) => void (event.event === 'ready' ? ready.push(event) : undefined);
  await waitFor(() => ready.length === 2 || !supervisor.running, 'both workers registered', 60_000);
  assert.equal(ready.length, 2, supervisor.stderrTail);

  const share = Math.floor((await hostMemory()).bytes / 2);
  assert.deepEqual(ready.map((r) => r.name).sort(), ['shared-0', 'shared-1']);
  for (const r of ready) assert.equal(r.memoryLimit, share, `${String(r.name)}: half of the host's memory`);
  assert.deepEqual(ready.map((r) => r.slot).sort(), [0, 1]);
  if (process.platform === 'linux' && process.env.NODE_OPTIONS?.includes('--v8-pool-size') !== true) {
    // V8's helper threads sized for two workers of one task thread each on this host.
    const helpers = v8HelperThreads({ workers: 2, taskThreads: 1 });
    for (const r of ready) {
      const environ = (await readFile(`/proc/${Number(r.pid)}/environ`, 'utf8')).split('\0');
      const options = environ.find((line) => line.startsWith('NODE_OPTIONS='));
      assert.match(options ?? '', new RegExp(`(^|\\s)--v8-pool-size=${helpers}(\\s|$)`), `${String(r.name)}: ${options}`);
    }
  }

  supervisor.child.kill('SIGTERM');
  const exit = await supervisor.exited;
  assert.deepEqual(exit, { code: 0, signal: null }, supervisor.stderrTail);
  assert.ok(!ready.some((r) => isRunning(Number(r.pid))), 'no worker outlives its supervisor');
});

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
