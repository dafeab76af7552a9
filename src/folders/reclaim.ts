import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { type Logger, silentLogger } from '../log.js';
import { FOLDER_PREFIX, OWNER_FILE, netnsOf, parseOwner, startTicksOf, takeLock, type OwnerRecord } from './owner.js';

/** A stale folder removed (or, in a dry run, that would be). */
export interface ReclaimedFolder {
  path: string;
  /** Disk space it held (allocated blocks). */
  bytes: number;
  owner: OwnerRecord;
}

export interface ReclaimReport {
  parent: string;
  /** True when nothing was removed, only listed. */
  dryRun: boolean;
  folders: ReclaimedFolder[];
  /** Sum of the folders' bytes. */
  bytes: number;
}

export interface ReclaimOptions {
  /** List what would be removed, remove nothing. */
  dryRun?: boolean;
  /** Told, at debug level, each folder judged and why it stays or goes. Default silent. */
  log?: Logger;
}

/** Folders nest (a cluster's holds its workers', a worker's its store's): looked into this deep. */
const MAX_DEPTH = 4;

/**
 * Removes the `spillway-*` folders directly under `parent` whose owner is gone: only
 * folders with a well-formed owner file (Spillway made them), never one whose owner still
 * runs, never one holding a folder whose owner still runs (its dead parts go instead),
 * never anything else. A parent that does not exist has nothing to reclaim.
 */
export async function reclaimStaleFolders(parent: string, options: ReclaimOptions = {}): Promise<ReclaimReport> {
  const report: ReclaimReport = { parent: path.resolve(parent), dryRun: options.dryRun === true, folders: [], bytes: 0 };
  await reclaimIn(report.parent, report, 0, new Liveness(), options.log ?? silentLogger);
  return report;
}

async function reclaimIn(parent: string, report: ReclaimReport, depth: number, liveness: Liveness, log: Logger): Promise<void> {
  for (const dir of await ownedChildren(parent)) {
    const verdict = await liveness.check(dir.owner);
    const fields = { path: dir.path, pid: dir.owner.pid, hostname: dir.owner.hostname, started: dir.owner.started };
    try {
      if (verdict.alive) {
        log.debug({ ...fields, why: verdict.why }, 'spill folder kept: its owner is alive');
        continue;
      }
      if (depth < MAX_DEPTH && (await holdsLiveFolder(dir.path, depth + 1, liveness))) {
        log.debug(fields, 'spill folder of a dead owner kept: it holds a live folder; looking inside');
        await reclaimIn(dir.path, report, depth + 1, liveness, log);
        continue;
      }
      const target = report.dryRun ? dir.path : await claim(dir.path);
      if (target === undefined) {
        log.debug(fields, 'stale spill folder taken by another reclaimer');
        continue;
      }
      const bytes = await diskBytes(target);
      if (!report.dryRun) await fsp.rm(target, { recursive: true, force: true, maxRetries: 3 });
      log.debug({ ...fields, bytes, why: verdict.why }, report.dryRun ? 'stale spill folder found (dry run: not removed)' : 'stale spill folder removed');
      report.folders.push({ path: dir.path, bytes, owner: dir.owner });
      report.bytes += bytes;
    } finally {
      verdict.lock?.close();
    }
  }
}

/**
 * Takes a stale folder for this reclaimer alone by renaming it: two workers starting in one
 * parent both judge the same folder stale, and only the rename's winner may measure, remove
 * and report it. The new name keeps the prefix and the owner file, so a folder whose
 * reclaimer dies mid-removal is still found, and judged stale, by the next one.
 */
async function claim(dir: string): Promise<string | undefined> {
  const claimed = path.join(path.dirname(dir), `${FOLDER_PREFIX}reclaiming-${randomBytes(6).toString('hex')}`);
  try {
    await fsp.rename(dir, claimed);
    return claimed;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The `spillway-*` folders under `parent` that have a well-formed owner file. */
async function ownedChildren(parent: string): Promise<{ path: string; owner: OwnerRecord }[]> {
  let entries: import('node:fs').Dirent[];
  try {
    entries = await fsp.readdir(parent, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return [];
    throw err;
  }
  const owned: { path: string; owner: OwnerRecord }[] = [];
  for (const entry of entries) {
    // A symbolic link is never followed: what it points to is not ours.
    if (!entry.isDirectory() || !entry.name.startsWith(FOLDER_PREFIX)) continue;
    const dir = path.join(parent, entry.name);
    let text: string;
    try {
      text = await fsp.readFile(path.join(dir, OWNER_FILE), 'utf8');
    } catch {
      continue;
    }
    const owner = parseOwner(text);
    if (owner !== undefined) owned.push({ path: dir, owner });
  }
  return owned;
}

async function holdsLiveFolder(dir: string, depth: number, liveness: Liveness): Promise<boolean> {
  for (const child of await ownedChildren(dir)) {
    const verdict = await liveness.check(child.owner);
    verdict.lock?.close();
    if (verdict.alive) return true;
    if (depth < MAX_DEPTH && (await holdsLiveFolder(child.path, depth + 1, liveness))) return true;
  }
  return false;
}

/** Allocated bytes of the files under `dir` (links not followed). */
async function diskBytes(dir: string): Promise<number> {
  let total = 0;
  let entries: import('node:fs').Dirent[];
  try {
    entries = await fsp.readdir(dir, { withFileTypes: true, recursive: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    try {
      const stat = await fsp.lstat(path.join(entry.parentPath ?? entry.path, entry.name));
      total += stat.blocks > 0 ? stat.blocks * 512 : stat.size;
    } catch {
      // Gone meanwhile.
    }
  }
  return total;
}

/** Tells whether an owner lives; on Linux, taking a dead owner's lock on the way. */
class Liveness {
  #netns: Promise<string | undefined> | undefined;

  /**
   * Alive when any sign says so: another host's folder is never judged from here; the
   * owner's lock is held; or its pid runs with the start time recorded (a lock in another
   * network namespace cannot be seen from this one).
   */
  async check(owner: OwnerRecord): Promise<{ alive: boolean; why: string; lock?: net.Server }> {
    if (owner.hostname !== os.hostname()) return { alive: true, why: 'made on another host' };
    if (await pidAlive(owner)) return { alive: true, why: 'its pid runs, started when the owner did' };
    if (owner.lock !== 'socket') return { alive: false, why: 'its pid is gone' };
    if (process.platform !== 'linux') return { alive: true, why: 'its lock cannot be checked on this platform' };
    const here = await (this.#netns ??= netnsOf('self'));
    if (owner.netns !== here) return { alive: false, why: 'its pid is gone (its lock is in another network namespace)' };
    const lock = await takeLock(owner.id);
    return lock === undefined ? { alive: true, why: 'its lock is held' } : { alive: false, why: 'its pid is gone and its lock is free', lock };
  }
}

/** The recorded pid runs, and (where known) started when the owner did. */
async function pidAlive(owner: OwnerRecord): Promise<boolean> {
  if (process.platform === 'linux') {
    const ticks = await startTicksOf(owner.pid);
    if (ticks === undefined) return false;
    return owner.startTicks === undefined || ticks === owner.startTicks;
  }
  try {
    process.kill(owner.pid, 0);
    return true;
  } catch (err) {
    // EPERM: it runs, as another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
