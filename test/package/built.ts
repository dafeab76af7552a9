/**
 * The built package (dist/, as `npm run build` leaves it) and a way to run Node against it
 * by its name, as an application would. `npm test` builds first.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { newestMtime } from '../helpers/mtime.js';
import { repoRoot } from '../helpers/suite.js';

interface PackageJson {
  exports: Record<string, { types: string; default: string }>;
  engines: { node: string };
  sideEffects: boolean;
  license: string;
}

export const packageJson = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as PackageJson;

/** Every import specifier the package offers: 'spillway', 'spillway/transfer', ... */
export const specifiers = Object.keys(packageJson.exports).map((subpath) => path.posix.join('spillway', subpath));

/** Throws, saying what to run, unless dist/ holds a build at least as new as src/. */
export function assertBuilt(): void {
  const index = path.join(repoRoot, 'dist', 'index.js');
  if (!fs.existsSync(index)) throw new Error('dist/ is missing: run `npm run build` first (npm test does)');
  if (fs.statSync(index).mtimeMs < newestMtime([path.join(repoRoot, 'src')], /\.ts$/)) {
    throw new Error('dist/ is older than src/: run `npm run build` first (npm test does)');
  }
}

/** Runs an ES module script with Node in `cwd` (where 'spillway' resolves to the package) and parses the JSON it prints. */
export async function runScript<T>(script: string, cwd = repoRoot, env: NodeJS.ProcessEnv = process.env): Promise<T> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd, env, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 });
  return JSON.parse(stdout) as T;
}
