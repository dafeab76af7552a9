import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { onCleanup } from './cleanup.js';

/** A fresh folder under the OS temp directory, removed when the test ends, after what was opened in it closes. */
export async function tempDir(t: TestContext, prefix = 'spillway-test-'): Promise<string> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), prefix));
  onCleanup(t, () => fsp.rm(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Runs `body` with a fresh folder, removed when it settles: for the runs of a property,
 * many to one test, each of which must leave nothing behind.
 */
export async function withTempDir<T>(body: (dir: string) => Promise<T>, prefix = 'spillway-test-'): Promise<T> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), prefix));
  try {
    return await body(dir);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}
