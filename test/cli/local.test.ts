/** `spillway local`, `scheduler` and `worker` as a user runs them: exit codes, JSON summary, clean shutdown. */
import assert from 'node:assert/strict';
import os from 'node:os';
import { once } from 'node:events';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import type { LocalSummary } from '../../src/cli/local.js';
import type { ChildProcess } from 'node:child_process';
import { cli as runCli, firstJsonLine, spawnCli, stdoutLine } from './helpers.js';
import { ext } from '../helpers/suite.js';


const cli = (args: string[]): ReturnType<typeof runCli> => runCli(args, { timeoutMs: 120_000 });

test('local --json runs a shuffle larger than the cluster and prints one verified JSON summary', async () => {
  const { code, stdout, stderr } = await cli(['local', '--workload', 'shuffle', '--memory-limit', '64MiB', '--size', '160MiB', '--partitions', '16', '--json']);
  assert.equal(code, 0, stderr);
  const lines = stdout.trim().split('\n');
  assert.equal(lines.length, 1);
  // Where to watch it: on stderr, since --json keeps stdout to one line.
  assert.match(stderr, /^dashboard: http:\/\/127\.0\.0\.1:\d+\/status$/m);
  const s = JSON.parse(lines[0]) as LocalSummary;
  assert.equal(s.workload, 'shuffle');
  assert.equal(s.completed, true);
  assert.equal(s.verified, true);
  assert.equal(s.partitions, 16);
  assert.ok(s.wallSeconds > 0 && s.dataBytes > 128 * 2 ** 20);
  assert.equal(s.workers.length, 2);
  for (const w of s.workers) {
    for (const field of ['memoryLimit', 'peakRss', 'spilledBytes', 'unspilledBytes', 'servedFromDiskBytes', 'maxEventLoopDelayMs', 'peakDiskBytes'] as const) {
      assert.equal(typeof w[field], 'number', field);
    }
    assert.ok(w.peakRss > 0);
    // The run's p99 comes from every tick since the worker started (recorded from 1 ns, so
    // above 0 once recorded), and is at most the worst.
    assert.ok(w.p99EventLoopDelayMs > 0 && w.p99EventLoopDelayMs <= w.maxEventLoopDelayMs + 1, `p99 ${w.p99EventLoopDelayMs}, worst ${w.maxEventLoopDelayMs}`);
  }
});

test('bad arguments exit with code 2 and say why', async () => {
  for (const [args, message] of [
    [['local', '--workload', 'sort'], /Allowed choices are shuffle, map-reduce/],
    [['local', '--workers', '0'], /at least 1/],
    [['local', '--size', 'lots'], /cannot read "lots" as a size/],
    [['worker', '--memory-limit', '1GiB'], /--scheduler/],
    [['worker', '--scheduler', 'nowhere', '--memory-limit', '1GiB'], /HOST:PORT/],
  ] as const) {
    const { code, stderr } = await cli([...args]);
    assert.equal(code, 2, `${args.join(' ')}: ${stderr}`);
    assert.match(stderr, message);
  }
});

test('scheduler and worker commands take the token from SPILLWAY_TOKEN, serve a client, and stop cleanly on SIGTERM', async () => {
  const env = { ...process.env, SPILLWAY_TOKEN: 'env-secret' };
  const start = (args: string[]): { child: ChildProcess; line: Promise<Record<string, unknown>> } => {
    const child = spawnCli(args, { env });
    return { child, line: firstJsonLine(child) };
  };
  const scheduler = start(['scheduler', '--port', '0', '--http-port', '0']);
  const dashboardLine = stdoutLine(scheduler.child, /^dashboard: /);
  try {
    const listening = await scheduler.line;
    assert.equal(listening.event, 'listening');
    const address = listening.address as { host: string; port: number };
    const http = listening.httpAddress as { host: string; port: number };
    assert.equal(await dashboardLine, `dashboard: http://${http.host}:${http.port}/status`);
    assert.equal((await fetch(`http://${http.host}:${http.port}/status`)).status, 200);
    const worker = start(['worker', '--scheduler', `${address.host}:${address.port}`, '--memory-limit', '64MiB', '--nthreads', '1', '--thread-nice', '3', '--http-port', '0']);
    try {
      const ready = await worker.line;
      assert.equal(ready.event, 'ready');
      const workerHttp = ready.httpAddress as { host: string; port: number };
      const health = await fetch(`http://${workerHttp.host}:${workerHttp.port}/health`);
      assert.equal(health.status, 200);
      assert.equal(((await health.json()) as { status: string }).status, 'ok');
      const client = await Client.connect(address, { token: 'env-secret' });
      const fn = { module: new URL(`../cluster/fixtures/tasks${ext}`, import.meta.url).href, name: 'add' };
      assert.deepEqual(await client.compute({ x: { fn, args: [20, 22] } }, ['x']), [42]);
      if (process.platform === 'linux') {
        const priority = { module: new URL(`../worker/fixtures/tasks${ext}`, import.meta.url).href, name: 'threadPriority' };
        assert.deepEqual(await client.compute({ p: { fn: priority, args: [] } }, ['p']), [Math.min(19, os.getPriority() + 3)], '--thread-nice reached the task thread');
      }
      await client.close();
    } finally {
      worker.child.kill('SIGTERM');
      const [code] = (await once(worker.child, 'exit')) as [number | null];
      assert.equal(code, 0);
    }
  } finally {
    scheduler.child.kill('SIGTERM');
    const [code] = (await once(scheduler.child, 'exit')) as [number | null];
    assert.equal(code, 0);
  }
});

test('a worker whose scheduler goes away closes cleanly and exits 1, so a supervisor restarts it', async () => {
  const env = { ...process.env, SPILLWAY_TOKEN: 'env-secret' };
  const scheduler = spawnCli(['scheduler', '--port', '0'], { env });
  const listening = await firstJsonLine(scheduler);
  const address = listening.address as { host: string; port: number };
  const worker = spawnCli(['worker', '--scheduler', `${address.host}:${address.port}`, '--memory-limit', '64MiB', '--nthreads', '1', '--no-supervisor', '--connect-timeout', '3s'], { env });
  try {
    assert.equal((await firstJsonLine(worker)).event, 'ready');
    const exited = once(worker, 'exit');
    scheduler.kill('SIGKILL');
    const [code] = (await exited) as [number | null];
    assert.equal(code, 1);
  } finally {
    if (worker.exitCode === null) worker.kill('SIGKILL');
    if (scheduler.exitCode === null && scheduler.signalCode === null) scheduler.kill('SIGKILL');
  }
});
