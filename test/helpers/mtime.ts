/**
 * The newest modification time among the files of some folders: how the suite decides that
 * a compile (build/ for the tests, dist/ for the package) is older than what it compiles.
 */
import fs from 'node:fs';
import path from 'node:path';

/** The newest mtime (ms) of the files under `dirs`, at any depth, whose name matches `name`; 0 if none. */
export function newestMtime(dirs: readonly string[], name: RegExp): number {
  let newest = 0;
  for (const dir of dirs) {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
      if (entry.isFile() && name.test(entry.name)) newest = Math.max(newest, fs.statSync(path.join(entry.parentPath, entry.name)).mtimeMs);
    }
  }
  return newest;
}
