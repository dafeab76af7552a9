/** Which folders reclaiming removes: only Spillway's, only a dead owner's, never a live one inside. */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { FolderOwner, OWNER_FILE, netnsOf, startTicksOf, type OwnerRecord } from '../../src/folders/owner.js';
import { reclaimStaleFolders } from '../../src/folders/reclaim.js';
import { tempDir } from '../helpers/temp-dir.js';

/** A well-formed owner record of a process that has exited (its pid is free, its lock unbound). */
async function deadOwner(overrides: Partial<OwnerRecord> = {}): Promise<OwnerRecord> {
  const child = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' });
  return {
    version: 1,
    id: randomBytes(12).toString('hex'),
    lock: process.platform === 'linux' ? 'socket' : 'pid',
    pid: Number(child.stdout.trim()),
    hostname: os.hostname(),
    started: new Date().toISOString(),
    ...(process.platform === 'linux' ? { startTicks: 1, netns: await netnsOf('self') } : {}),
    ...overrides,
  };
}

async function folderOf(parent: string, name: string, owner: OwnerRecord | string, bytes = 0): Promise<string> {
  const dir = path.join(parent, name);
  await fsp.mkdir(dir);
  await fsp.writeFile(path.join(dir, OWNER_FILE), typeof owner === 'string' ? owner : JSON.stringify(owner));
  if (bytes > 0) await fsp.writeFile(path.join(dir, 'data.spw'), Buffer.alloc(bytes, 1));
  return dir;
}

test('a dead owner\'s folder is removed and its bytes reported; a live one, a foreign one, a link never', async (t) => {
  const parent = await tempDir(t);
  const live = await FolderOwner.create(parent, 'spillway-');
  t.after(() => live.release());
  const dead = await folderOf(parent, 'spillway-dead', await deadOwner(), 256 * 1024);
  await folderOf(parent, 'spillway-garbled', '{"version":1,');
  await folderOf(parent, 'spillway-wrong', JSON.stringify({ ...(await deadOwner()), id: 'not hex' }));
  await folderOf(parent, 'other-prefix', await deadOwner());
  await folderOf(parent, 'spillway-elsewhere', await deadOwner({ hostname: `${os.hostname()}-other` }));
  const outside = await tempDir(t);
  const target = await folderOf(outside, 'spillway-target', await deadOwner(), 1024);
  await fsp.symlink(target, path.join(parent, 'spillway-link'));

  const dry = await reclaimStaleFolders(parent, { dryRun: true });
  assert.deepEqual(dry.folders.map((f) => f.path), [dead]);
  assert.ok(dry.bytes >= 256 * 1024);
  await fsp.access(dead);

  const report = await reclaimStaleFolders(parent);
  assert.deepEqual(report.folders.map((f) => f.path), [dead]);
  assert.equal(report.bytes, dry.bytes);
  await assert.rejects(fsp.access(dead));
  const left = (await fsp.readdir(parent)).sort();
  assert.deepEqual(left, [path.basename(live.directory), 'other-prefix', 'spillway-elsewhere', 'spillway-garbled', 'spillway-link', 'spillway-wrong'].sort());
  await fsp.access(path.join(target, 'data.spw'));
  assert.deepEqual(await reclaimStaleFolders(path.join(parent, 'missing')), { parent: path.join(parent, 'missing'), dryRun: false, folders: [], bytes: 0 });
});

test('a dead folder holding a live owner\'s folder stays; only its dead parts go', async (t) => {
  const parent = await tempDir(t);
  const outer = await folderOf(parent, 'spillway-cluster-dead', await deadOwner());
  const deadInner = await folderOf(outer, 'spillway-worker-dead', await deadOwner(), 4096);
  const liveInner = await FolderOwner.create(outer, 'spillway-worker-');
  t.after(() => liveInner.release());
  const report = await reclaimStaleFolders(parent);
  assert.deepEqual(report.folders.map((f) => f.path), [deadInner]);
  await fsp.access(liveInner.directory);
  await fsp.access(path.join(outer, OWNER_FILE));
  await liveInner.release();
  assert.deepEqual((await reclaimStaleFolders(parent)).folders.map((f) => f.path), [outer]);
});

test('a reused pid does not keep a folder alive: the start time (and, on Linux, the lock) tell', { skip: process.platform !== 'linux' && 'Linux: /proc start times' }, async (t) => {
  const parent = await tempDir(t);
  const ticks = (await startTicksOf(process.pid)) as number;
  // This process's pid, another start time, a lock nobody holds: the pid was reused.
  const reused = await folderOf(parent, 'spillway-reused', await deadOwner({ pid: process.pid, startTicks: ticks + 1 }));
  // This process's pid and start time: alive, whatever its lock says.
  await folderOf(parent, 'spillway-self', await deadOwner({ pid: process.pid, startTicks: ticks }));
  const report = await reclaimStaleFolders(parent);
  assert.deepEqual(report.folders.map((f) => f.path), [reused]);
  assert.deepEqual(await fsp.readdir(parent), ['spillway-self']);
});

test('two reclaimers at once: each stale folder is removed and reported by exactly one of them', async (t) => {
  const parent = await tempDir(t);
  // Pid-locked owners: no lock to take, so both reclaimers judge every folder stale at once.
  const dead = new Map<string, number>();
  for (let i = 0; i < 16; i++) {
    const bytes = (i + 1) * 4096;
    dead.set(await folderOf(parent, `spillway-dead-${i}`, await deadOwner({ lock: 'pid' }), bytes), bytes);
  }
  const reports = await Promise.all([reclaimStaleFolders(parent), reclaimStaleFolders(parent), reclaimStaleFolders(parent)]);
  const reported = reports.flatMap((r) => r.folders);
  assert.deepEqual(reported.map((f) => f.path).sort(), [...dead.keys()].sort(), 'each folder reported once');
  for (const folder of reported) assert.ok(folder.bytes >= (dead.get(folder.path) as number), `${folder.path}: ${folder.bytes} bytes`);
  for (const report of reports) assert.equal(report.bytes, report.folders.reduce((sum, f) => sum + f.bytes, 0));
  assert.deepEqual(await fsp.readdir(parent), []);
});

test('a folder left half-removed by a reclaimer that died is found and removed by the next', async (t) => {
  const parent = await tempDir(t);
  const owner = await deadOwner();
  // What a claim leaves when its reclaimer dies before removing: the prefix and the owner file.
  const orphan = await folderOf(parent, 'spillway-reclaiming-0123456789ab', owner, 8192);
  const report = await reclaimStaleFolders(parent);
  assert.deepEqual(report.folders.map((f) => f.path), [orphan]);
  assert.deepEqual(await fsp.readdir(parent), []);
});
