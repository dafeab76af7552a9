/**
 * examples/arrow-tasks.mjs runs as a user would run it: plain `node`, importing `spillway`
 * from the built package, on a local cluster of its own (issue 31).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { repoRoot } from '../helpers/suite.js';
import { assertBuilt } from './built.js';

test('the Arrow-in-tasks example runs with plain node against the build', { timeout: 180_000 }, async () => {
  assertBuilt();
  const script = path.join(repoRoot, 'examples', 'arrow-tasks.mjs');
  // No tsx: the example must work from dist/ alone.
  const { stdout } = await promisify(execFile)(process.execPath, [script], { cwd: repoRoot, timeout: 150_000, env: { ...process.env, NODE_OPTIONS: '' } });
  assert.match(stdout, /is an Arrow table: true \| is a Histogram: true/);
  const sales = [...stdout.matchAll(/sales: (\d+)/g)].map((m) => Number(m[1]));
  assert.equal(sales.length, 4, 'a row per region');
  assert.equal(
    sales.reduce((a, b) => a + b, 0),
    800_000,
    'every sale counted once',
  );
  const histogram = /amounts by hundreds: \[([^\]]*)\]/.exec(stdout)?.[1].split(',').map((n) => Number(n.trim()));
  assert.equal(histogram?.reduce((a, b) => a + b, 0), 800_000);
});
