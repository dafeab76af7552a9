/** `spillway worker` as a supervisor, with real processes: its workers share the host's memory and go when it is told to. */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { CliProcess } from '../../src/client/processes.js';
import { OLD_SPACE_VARIABLE, mallocArenas, mallocThresholds, v8HelperThreads } from '../../src/runtime/tuned-environment.js';
import { hostMemory } from '../../src/worker/memory-limit.js';
import { alive, commandLine, environment, groupAndSession } from '../helpers/proc.js';
import { waitFor } from '../helpers/wait.js';
import { spawnCli } from './helpers.js';

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
      const options = (await environment(Number(r.pid))).get('NODE_OPTIONS');
      assert.match(options ?? '', new RegExp(`(^|\\s)--v8-pool-size=${helpers}(\\s|$)`), `${String(r.name)}: ${options}`);
    }
  }

  if (process.platform === 'linux' && process.env.MALLOC_MMAP_THRESHOLD_ === undefined) {
    // The supervisor resolved 'auto' to the same share: its allocator tuning follows it.
    for (const r of ready) assert.equal((await environment(Number(r.pid))).get('MALLOC_MMAP_THRESHOLD_'), String(mallocThresholds(share).mmap));
  }
  if (process.platform === 'linux' && process.env.MALLOC_ARENA_MAX === undefined) {
    for (const r of ready) assert.equal((await environment(Number(r.pid))).get('MALLOC_ARENA_MAX'), String(mallocArenas(share)));
  }

  supervisor.child.kill('SIGTERM');
  const exit = await supervisor.exited;
  assert.deepEqual(exit, { code: 0, signal: null }, supervisor.stderrTail);
  assert.ok(!ready.some((r) => alive(Number(r.pid))), 'no worker outlives its supervisor');
});

test('spillway worker --memory-limit 192MiB: the supervisor tunes its worker for that limit (malloc thresholds, old-space floor)', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  const env = { SPILLWAY_TOKEN: 'test-token' };
  const scheduler = new CliProcess('scheduler', ['scheduler', '--port', '0'], env, 'pipe');
  t.after(() => scheduler.stop(5_000));
  const { address } = (await scheduler.waitForEvent('listening', 30_000)) as { address: { host: string; port: number } };
  const supervisor = new CliProcess('supervisor', ['worker', '--scheduler', `${address.host}:${address.port}`, '--memory-limit', '192MiB', '--nthreads', '1'], env, 'pipe');
  t.after(() => supervisor.stop(5_000));
  const ready = (await supervisor.waitForEvent('ready', 60_000)) as { pid: number; memoryLimit: number };
  assert.equal(ready.memoryLimit, 192 * 2 ** 20);

  // Under 1 GiB: large buffers are mapped and unmapped when freed, not kept in malloc's heap.
  const workerEnv = await environment(ready.pid);
  assert.equal(workerEnv.get('MALLOC_MMAP_THRESHOLD_'), process.env.MALLOC_MMAP_THRESHOLD_ ?? '262144');
  assert.equal(workerEnv.get('MALLOC_TRIM_THRESHOLD_'), process.env.MALLOC_TRIM_THRESHOLD_ ?? '524288');
  // The old generation's floor is a fifth of the limit, on the worker's command line.
  if (process.env[OLD_SPACE_VARIABLE] === undefined) {
    const args = await commandLine(ready.pid);
    assert.ok(args.includes('--initial-old-space-size=38'), args.join(' '));
  }
  supervisor.child.kill('SIGTERM');
  assert.deepEqual(await supervisor.exited, { code: 0, signal: null }, supervisor.stderrTail);
});

test('the workers share their supervisor\'s session and group: a group\'s SIGTERM retires each once, and all exit 0', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  const env = { SPILLWAY_TOKEN: 'test-token' };
  const scheduler = new CliProcess('scheduler', ['scheduler', '--port', '0'], env, 'pipe');
  t.after(() => scheduler.stop(5_000));
  const { address } = (await scheduler.waitForEvent('listening', 30_000)) as { address: { host: string; port: number } };
  // The supervisor leads a session of its own, as a terminal's job or a systemd unit would.
  const supervisor = spawnCli(['worker', '--scheduler', `${address.host}:${address.port}`, '--memory-limit', '128MiB', '--nworkers', '2', '--nthreads', '1'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const exited = once(supervisor, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  t.after(() => void (alive(supervisor.pid as number) ? process.kill(-(supervisor.pid as number), 'SIGKILL') : undefined));
  let stderr = '';
  supervisor.stderr?.setEncoding('utf8').on('data', (chunk: string) => void (stderr = (stderr + chunk).slice(-8192)));
  const pids: number[] = [];
  let partial = '';
  supervisor.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const event = JSON.parse(line) as { event: string; pid?: number };
      if (event.event === 'ready') pids.push(event.pid as number);
    }
  });
  await waitFor(() => pids.length === 2 || supervisor.exitCode !== null, 'both workers registered', 60_000);
  assert.equal(pids.length, 2, stderr);

  // One session for the whole job: where Linux groups CPU time by session (autogroup), the
  // workers' nice values then order their threads against each other's.
  const leader = supervisor.pid as number;
  for (const pid of pids) assert.deepEqual(await groupAndSession(pid), { pgrp: leader, session: leader }, `worker ${pid}`);

  // The signal reaches the supervisor and the workers at once; the supervisor passes it on
  // too. Each worker retires once and exits 0, so the supervisor does.
  process.kill(-leader, 'SIGTERM');
  const [code, signal] = await exited;
  assert.deepEqual({ code, signal }, { code: 0, signal: null }, stderr);
  assert.ok(!pids.some(alive), 'no worker outlives its supervisor');
});
