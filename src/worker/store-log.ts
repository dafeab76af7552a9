import { statfs } from 'node:fs/promises';
import { SpillwayError, errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import type { SpillStore } from '../store/spill-store.js';

/** An episode ends after this long without an error of its kind. */
const EPISODE_QUIET_MS = 10_000;

interface Episode {
  first: number;
  count: number;
  timer: NodeJS.Timeout;
}

/**
 * Logs what the worker's store reports: pause and resume with RSS and the limit, and spill
 * and read errors as episodes: one line when errors of a kind (code and errno) begin, with
 * the directory and its free bytes, and one when they stop, with how many there were. A
 * full disk fails every value's write; a line per value would bury everything else.
 */
export class StoreLog {
  readonly #episodes = new Map<string, Episode>();
  readonly #log: Logger;
  readonly #directory: string;
  readonly #limit: number;

  constructor(store: SpillStore, log: Logger, directory: string, memoryLimit: number) {
    this.#log = log;
    this.#directory = directory;
    this.#limit = memoryLimit;
    store.on('error', (err: unknown) => this.#onError(err));
    store.on('pause', (e: { residentBytes: number; rss: number }) => log.info({ rss: e.rss, residentBytes: e.residentBytes, limit: this.#limit }, 'store paused: memory over its pause level'));
    store.on('resume', (e: { residentBytes: number; rss: number }) => log.info({ rss: e.rss, residentBytes: e.residentBytes, limit: this.#limit }, 'store resumed'));
    store.on('unspillable', (e: { reason: string; residentBytes: number; targetBytes: number }) =>
      log.warn({ reason: e.reason, residentBytes: e.residentBytes, targetBytes: e.targetBytes, limit: this.#limit }, 'store over target with nothing it can spill'),
    );
  }

  /** Ends the open episodes (their closing lines), e.g. when the worker closes. */
  close(): void {
    for (const [kind, episode] of this.#episodes) this.#end(kind, episode);
  }

  #onError(err: unknown): void {
    const code = err instanceof SpillwayError ? err.code : 'SPW_ERR_UNKNOWN';
    const errno = causeCode(err);
    const kind = `${code}/${errno ?? ''}`;
    const open = this.#episodes.get(kind);
    if (open !== undefined) {
      open.count++;
      open.timer.refresh();
      return;
    }
    const episode: Episode = { first: Date.now(), count: 1, timer: setTimeout(() => this.#end(kind, episode), EPISODE_QUIET_MS).unref() };
    this.#episodes.set(kind, episode);
    void statfs(this.#directory).then(
      (fs) => fs.bavail * fs.bsize,
      () => undefined,
    ).then((freeBytes) => {
      this.#log.error({ code, errno, directory: this.#directory, freeBytes, err: errorMessage(err) }, 'store errors began (one line per episode; the values stay in memory or are read again)');
    });
  }

  #end(kind: string, episode: Episode): void {
    clearTimeout(episode.timer);
    if (this.#episodes.get(kind) !== episode) return;
    this.#episodes.delete(kind);
    const [code, errno] = kind.split('/');
    this.#log.warn({ code, errno: errno === '' ? undefined : errno, errors: episode.count, seconds: (Date.now() - episode.first) / 1000 }, 'store errors stopped');
  }
}

/** The system error code (ENOSPC, EIO...) somewhere in an error's causes. */
function causeCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && !code.startsWith('SPW_ERR_')) return code;
  }
  return undefined;
}
