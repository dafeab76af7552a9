/** Spill folders never outlive their owner: real processes, real signals (docs/configuration.md, "Spill folders"). */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { CliProcess } from '../../src/client/processes.js';
import { OWNER_FILE } from '../../src/folders/owner.js';
import { tempDir } from '../helpers/temp-dir.js';
import { cli, logLines, scheduler, spawnCli } from './helpers.js';

const MiB = 1024 * 1024;

/** The worker process itself (no supervisor): a SIGKILL must reach the process owning the folder. */
function worker(t: TestContext, address: string, parent: string): CliProcess {
  const p = new CliProcess('worker', ['worker', '--no-supervisor', '--scheduler', address, '--memory-limit', '64MiB', '--nthreads', '1', '--local-directory', parent], { SPILLWAY_TOKEN: 'test-token' }, 'pipe');
  t.after(() => p.stop(5_000));
  return p;
}

/** The spill folders directly under `parent`. */
async function folders(parent: string): Promise<string[]> {
  return (await fsp.readdir(parent)).filter((name) => name.startsWith('spillway-')).sort();
}

test('a SIGKILLed worker\'s folder is reclaimed by the next worker in the same parent, never a live one nor a folder not Spillway\'s', async (t) => {
  const parent = await tempDir(t, 'spillway-test-reclaim-');
  // Not Spillway's: no owner file, and an owner file that is not one. Never touched.
  await fsp.mkdir(path.join(parent, 'spillway-not-ours'));
  await fsp.writeFile(path.join(parent, 'spillway-not-ours', 'data'), 'keep me');
  await fsp.mkdir(path.join(parent, 'spillway-forged'));
  await fsp.writeFile(path.join(parent, 'spillway-forged', OWNER_FILE), '{"version":1,"pid":1}');
  const address = await scheduler(t);

  const doomed = worker(t, address, parent);
  await doomed.waitForEvent('ready', 30_000);
  const [dead] = (await folders(parent)).filter((name) => name.startsWith('spillway-worker-'));
  assert.ok(dead !== undefined, 'the worker made its folder');
  // Spilled bytes, as a worker killed mid-shuffle leaves them.
  const storeFolder = (await fsp.readdir(path.join(parent, dead))).find((name) => name.startsWith('spillway-')) as string;
  await fsp.writeFile(path.join(parent, dead, storeFolder, 'segment.spw'), Buffer.alloc(2 * MiB, 7));
  doomed.child.kill('SIGKILL');
  await doomed.exited;

  // `clean --dry-run` lists it and removes nothing.
  const dry = await cli(['clean', '--local-directory', parent, '--dry-run', '--json', '--log-level', 'debug']);
  assert.equal(dry.code, 0, dry.stderr);
  // Its debug log (JSON on a pipe) says why the folder would go.
  const found = logLines(dry.stderr).find((l) => l.msg === 'stale spill folder found (dry run: not removed)');
  assert.equal(found?.path, path.join(parent, dead), dry.stderr);
  assert.match(String(found?.why), /pid is gone/);
  const listed = JSON.parse(dry.stdout) as { dryRun: boolean; folders: { path: string; bytes: number }[]; bytes: number };
  assert.equal(listed.dryRun, true);
  assert.deepEqual(listed.folders.map((f) => path.basename(f.path)), [dead]);
  assert.ok(listed.bytes >= 2 * MiB, `${listed.bytes} bytes listed`);
  assert.ok((await folders(parent)).includes(dead), 'a dry run removes nothing');

  // Two workers start at once: the dead folder goes, neither touches the other's.
  const next = worker(t, address, parent);
  const other = worker(t, address, parent);
  await Promise.all([next.waitForEvent('ready', 30_000), other.waitForEvent('ready', 30_000)]);
  const reclaimed = await Promise.any([next.waitForEvent('reclaimed', 1_000), other.waitForEvent('reclaimed', 1_000)]);
  const report = reclaimed as { folders: { path: string; bytes: number }[]; bytes: number };
  assert.deepEqual(report.folders.map((f) => path.basename(f.path)), [dead]);
  assert.ok(report.bytes >= 2 * MiB, `${report.bytes} bytes reported`);
  const now = await folders(parent);
  assert.ok(!now.includes(dead), 'the dead worker\'s folder is gone');
  assert.equal(now.filter((name) => name.startsWith('spillway-worker-')).length, 2, `both live workers keep theirs: ${now.join()}`);
  assert.equal(await fsp.readFile(path.join(parent, 'spillway-not-ours', 'data'), 'utf8'), 'keep me');
  assert.ok(now.includes('spillway-forged'));

  // A live worker's folder survives `clean` too, and a third worker starting beside it.
  const cleaned = await cli(['clean', '--local-directory', parent, '--json'], { env: { ...process.env, SPILLWAY_LOG_LEVEL: 'debug' } });
  assert.equal(cleaned.code, 0, cleaned.stderr);
  const kept = logLines(cleaned.stderr).filter((l) => l.msg === 'spill folder kept: its owner is alive');
  assert.deepEqual(kept.map((l) => path.basename(String(l.path))).sort(), now.filter((name) => name.startsWith('spillway-worker-')).sort(), cleaned.stderr);
  // At the default level, nothing on stderr.
  const quiet = await cli(['clean', '--local-directory', parent, '--json']);
  assert.equal(quiet.stderr, '');
  assert.deepEqual((JSON.parse(cleaned.stdout) as { folders: unknown[] }).folders, []);
  assert.deepEqual(await folders(parent), now);

  await Promise.all([next.stop(5_000), other.stop(5_000)]);
  assert.deepEqual(await folders(parent), ['spillway-forged', 'spillway-not-ours'], 'a stopped worker removes its own folder');
});

test('`spillway local` sent SIGHUP mid-shuffle leaves nothing behind in its parent', async (t) => {
  const parent = await tempDir(t, 'spillway-test-hup-');
  const child = spawnCli(['local', '--local-directory', parent, '--memory-limit', '64MiB', '--size', '400MiB', '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = once(child, 'exit');
  t.after(() => child.kill('SIGKILL'));
  // Mid-shuffle: the workers have spilled (generous: the cluster starts slowly on a loaded machine).
  const deadline = Date.now() + 120_000;
  while ((await bytesUnder(parent)) < 4 * MiB && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  assert.ok((await bytesUnder(parent)) >= 4 * MiB, 'the workers spilled');
  child.kill('SIGHUP');
  const [code, signal] = (await exited) as [number | null, NodeJS.Signals | null];
  assert.equal(signal, null, 'it exits on its own, not killed by the signal');
  assert.equal(code, 129);
  assert.deepEqual(await fsp.readdir(parent), []);
});

test('`spillway worker` and `spillway scheduler` stop cleanly on SIGHUP; the worker removes its folder', async (t) => {
  const parent = await tempDir(t, 'spillway-test-hup-worker-');
  const address = await scheduler(t);
  const w = worker(t, address, parent);
  await w.waitForEvent('ready', 30_000);
  assert.equal((await folders(parent)).length, 1);
  w.child.kill('SIGHUP');
  const { code, signal } = await w.exited;
  assert.deepEqual({ code, signal }, { code: 0, signal: null });
  assert.deepEqual(await fsp.readdir(parent), []);

  const s = new CliProcess('scheduler', ['scheduler', '--port', '0'], { SPILLWAY_TOKEN: 'test-token' }, 'pipe');
  t.after(() => s.stop(5_000));
  await s.waitForEvent('listening', 30_000);
  s.child.kill('SIGHUP');
  assert.deepEqual(await s.exited, { code: 0, signal: null });
});

async function bytesUnder(dir: string): Promise<number> {
  let total = 0;
  for (const e of await fsp.readdir(dir, { withFileTypes: true, recursive: true }).catch(() => [])) {
    if (e.isFile()) total += (await fsp.stat(path.join(e.parentPath ?? e.path, e.name)).catch(() => ({ size: 0 }))).size;
  }
  return total;
}
