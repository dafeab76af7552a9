/**
 * examples/typed-tasks.mjs runs as a user would run it: plain `node`, importing `spillway`
 * from the built package, on a local cluster of its own (issue 32).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { repoRoot } from '../helpers/suite.js';
import { assertBuilt } from './built.js';

test('the typed-tasks example runs with plain node against the build', { timeout: 180_000 }, async () => {
  assertBuilt();
  const script = path.join(repoRoot, 'examples', 'typed-tasks.mjs');
  // No tsx: the example must work from dist/ alone.
  const { stdout } = await promisify(execFile)(process.execPath, [script], { cwd: repoRoot, timeout: 150_000, env: { ...process.env, NODE_OPTIONS: '' } });
  assert.match(stdout, /futures: \{ count: 8000000, sum: 3936928097, mean: 492\.116012125 \}/);
  assert.match(stdout, /lazy: \{ count: 4000000, sum: \d+, mean: [\d.]+ \}/);
});
