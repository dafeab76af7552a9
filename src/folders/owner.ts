import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** The file inside every folder Spillway makes that says which process owns it. */
export const OWNER_FILE = '.spillway-owner';
/** Every folder Spillway makes starts with this. */
export const FOLDER_PREFIX = 'spillway-';

/**
 * What an owner file holds. `id` names the owner's lock; `pid`, `hostname` and `started`
 * are for people (and for the fallback where there is no such lock).
 */
export interface OwnerRecord {
  version: 1;
  /** Random, 24 hex digits: the abstract socket `\0spillway-<id>` (Linux) is the lock. */
  id: string;
  /** How liveness is told: 'socket' (Linux) or 'pid' (elsewhere). */
  lock: 'socket' | 'pid';
  pid: number;
  hostname: string;
  /** The owner's start, ISO 8601. */
  started: string;
  /** Linux: the process's start in clock ticks since boot (/proc/<pid>/stat), which a reused pid does not share. */
  startTicks?: number;
  /** Linux: the network namespace the socket is bound in (abstract sockets are per namespace). */
  netns?: string;
}

/**
 * Owning a folder while the process lives. On Linux the owner binds an abstract unix
 * socket named after a random id: the kernel releases the name when the process dies,
 * however it dies (SIGKILL, the OOM killer), and a pid reused by another process does not
 * hold it. Elsewhere, the pid and its start time stand in (see docs/configuration.md).
 */
export class FolderOwner {
  #server: net.Server | undefined;
  #released = false;

  private constructor(
    readonly directory: string,
    readonly record: OwnerRecord,
    server: net.Server | undefined,
  ) {
    this.#server = server;
  }

  /**
   * Makes a fresh folder `<parent>/<prefix>XXXXXX` owned by this process. The lock is
   * taken before the owner file is written, so a folder with an owner file always has its
   * lock held while its owner lives.
   */
  static async create(parent: string, prefix: string): Promise<FolderOwner> {
    await fsp.mkdir(parent, { recursive: true });
    const directory = await fsp.mkdtemp(path.join(parent, prefix));
    try {
      const id = randomBytes(12).toString('hex');
      const server = process.platform === 'linux' ? await bindLock(id) : undefined;
      const ticks = await startTicksOf(process.pid);
      const record: OwnerRecord = {
        version: 1,
        id,
        lock: server === undefined ? 'pid' : 'socket',
        pid: process.pid,
        hostname: os.hostname(),
        started: new Date(Date.now() - process.uptime() * 1000).toISOString(),
        ...(ticks === undefined ? {} : { startTicks: ticks }),
        ...(server === undefined ? {} : { netns: await netnsOf('self') }),
      };
      try {
        // Written whole or not at all: a reader never sees half a record.
        const partial = path.join(directory, `${OWNER_FILE}.${id}.tmp`);
        await fsp.writeFile(partial, JSON.stringify(record) + '\n');
        await fsp.rename(partial, path.join(directory, OWNER_FILE));
      } catch (err) {
        server?.close();
        throw err;
      }
      return new FolderOwner(directory, record, server);
    } catch (err) {
      await fsp.rm(directory, { recursive: true, force: true });
      throw err;
    }
  }

  /** Removes the folder, then lets go of the lock. Safe to call twice. */
  async release(): Promise<void> {
    if (this.#released) return;
    this.#released = true;
    try {
      await fsp.rm(this.directory, { recursive: true, force: true, maxRetries: 3 });
    } finally {
      this.#server?.close();
      this.#server = undefined;
    }
  }
}

function lockName(id: string): string {
  return `\0spillway-${id}`;
}

/** Binds the abstract socket of `id`; unref'd, so it never keeps the process alive. */
function bindLock(id: string): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer((socket) => socket.destroy());
    server.once('error', reject);
    server.listen({ path: lockName(id) }, () => {
      server.off('error', reject);
      server.unref();
      resolve(server);
    });
  });
}

/**
 * Takes the lock of a dead owner, so two processes reclaiming at once cannot both act on
 * the same folder: the lock, or undefined when someone holds it (the owner is alive).
 */
export async function takeLock(id: string): Promise<net.Server | undefined> {
  try {
    return await bindLock(id);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') return undefined;
    throw err;
  }
}

/** Linux: a process's start time in clock ticks since boot, or undefined (no such process, or no /proc). */
export async function startTicksOf(pid: number | 'self'): Promise<number | undefined> {
  if (process.platform !== 'linux') return undefined;
  try {
    const stat = await fsp.readFile(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]);
    return Number.isSafeInteger(ticks) ? ticks : undefined;
  } catch {
    return undefined;
  }
}

/** Linux: the network namespace of a process (`net:[4026531840]`), or undefined. */
export async function netnsOf(pid: number | 'self'): Promise<string | undefined> {
  try {
    return await fsp.readlink(`/proc/${pid}/ns/net`);
  } catch {
    return undefined;
  }
}

/** A well-formed owner record, or undefined: a folder without one is never Spillway's to touch. */
export function parseOwner(text: string): OwnerRecord | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof raw !== 'object' || raw === null) return undefined;
  const r = raw as Partial<Record<keyof OwnerRecord, unknown>>;
  const ok =
    r.version === 1 &&
    typeof r.id === 'string' &&
    /^[0-9a-f]{24}$/.test(r.id) &&
    (r.lock === 'socket' || r.lock === 'pid') &&
    typeof r.pid === 'number' &&
    Number.isSafeInteger(r.pid) &&
    r.pid > 0 &&
    typeof r.hostname === 'string' &&
    typeof r.started === 'string' &&
    (r.startTicks === undefined || (typeof r.startTicks === 'number' && Number.isSafeInteger(r.startTicks))) &&
    (r.netns === undefined || typeof r.netns === 'string');
  return ok ? (raw as OwnerRecord) : undefined;
}
