/** A worker whose spill folder is on a full filesystem (a 1 MiB tmpfs): one log line per episode, with ENOSPC; the job still verifies. */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { Client } from '../../src/client/client.js';
import type { Graph } from '../../src/cluster/protocol.js';
import type { Logger } from '../../src/log.js';
import { Scheduler } from '../../src/scheduler/index.js';
import { Worker } from '../../src/worker/index.js';
import { waitFor } from '../helpers/wait.js';
import { MiB, fixture } from './helpers.js';

const run = promisify(execFile);
const root = process.platform === 'linux' && process.getuid?.() === 0;

interface Line {
  level: string;
  fields: Record<string, unknown>;
  msg: string;
}

function recorder(lines: Line[]): Logger {
  const at = (level: string) => (fields: object, msg = ''): void => void lines.push({ level, fields: fields as Record<string, unknown>, msg });
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

test('spilling onto a full tmpfs: one error line with ENOSPC, directory and free bytes; the values stay in memory and the job verifies', { skip: !root && 'mounts a tmpfs (Linux, root)' }, async (t) => {
  const mount = await mkdtemp(path.join(os.tmpdir(), 'spillway-enospc-'));
  await run('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', mount]);
  const scheduler = await Scheduler.start({ token: 'full-disk' });
  t.after(() => scheduler.close());
  const lines: Line[] = [];
  // The RSS monitor off: the store spills by the bytes it holds, so the test does not depend on this process's RSS.
  const worker = await Worker.start({ scheduler: scheduler.address, token: 'full-disk', memoryLimit: 64 * MiB, monitorIntervalMs: 0, nthreads: 1, localDirectory: mount, logger: recorder(lines) });
  t.after(() => worker.close());
  const client = await Client.connect(scheduler.address, { token: 'full-disk' });
  t.after(() => client.close());
  // After hooks run in order: the processes' folders first, then the mount.
  t.after(async () => {
    await run('umount', ['-l', mount]).catch(() => undefined);
    await rm(mount, { recursive: true, force: true });
  });
  // 40 MiB of results against a 38 MiB target: some must be spilled, and no value fits in 1 MiB.
  const graph: Graph = {};
  for (let i = 0; i < 10; i++) graph[`v${i}`] = { fn: fixture('fill'), args: [MiB / 2, i] };
  const values = await client.compute<Float64Array>(graph, Object.keys(graph), { keep: true });
  values.forEach((v, i) => assert.ok(v.length === MiB / 2 && v.every((x) => x === i), `v${i} intact`));
  await waitFor(() => lines.some((l) => l.msg.startsWith('store errors began')), 'the error line', 10_000);
  // The store keeps retrying while the disk stays full: still one line.
  await new Promise((resolve) => setTimeout(resolve, 2500));
  const began = lines.filter((l) => l.msg.startsWith('store errors began'));
  t.diagnostic(JSON.stringify(began.map((l) => l.fields)));
  const enospc = began.filter((l) => l.fields.errno === 'ENOSPC');
  assert.equal(enospc.length, 1, 'one line for the episode');
  assert.equal(enospc[0].level, 'error');
  assert.equal(enospc[0].fields.code, 'SPW_ERR_TIER_WRITE');
  assert.ok(String(enospc[0].fields.directory).startsWith(mount));
  assert.equal(typeof enospc[0].fields.freeBytes, 'number');
  assert.ok((enospc[0].fields.freeBytes as number) <= MiB, 'the free bytes of the 1 MiB tmpfs');
  for (const key of Object.keys(graph)) assert.ok(worker.store.has(key), `${key} still held by the worker`);
});
