import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type CleanupOwner, onCleanup, withCleanup } from './cleanup.js';

/** A fresh folder under the OS temp directory, removed when the test (or scope) ends, after what was opened in it closes. */
export async function tempDir(owner: CleanupOwner, prefix = 'spillway-test-'): Promise<string> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), prefix));
  onCleanup(owner, () => fsp.rm(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Runs `body` with a fresh folder, removed when it settles: for the runs of a property,
 * many to one test, each of which must leave nothing behind.
 */
export function withTempDir<T>(body: (dir: string) => Promise<T>, prefix = 'spillway-test-'): Promise<T> {
  return withCleanup(async (scope) => body(await tempDir(scope, prefix)));
}
