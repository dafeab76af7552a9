import fsp from 'node:fs/promises';
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { runDemo, type DemoSummary } from '../../src/cli/demo.js';
import { InvalidArgumentError } from '../../src/errors.js';
import { tempDir as freshDir } from '../helpers/temp-dir.js';
import { cli } from './helpers.js';

const MiB = 1024 * 1024;

const tempDir = (t: TestContext): Promise<string> => freshDir(t, 'spillway-cli-test-');

function assertSpilledAndVerified(s: DemoSummary, limit: number): void {
  assert.equal(s.verified, true);
  assert.equal(s.badKeyCount, 0);
  assert.equal(s.dataBytes, 4 * limit);
  assert.equal(s.keys, 4 * limit / s.valueSize);
  assert.ok(s.spilledBytes > 0, 'something was spilled');
  assert.ok(s.diskWrites > 0);
  assert.ok(s.write.throughput > 0 && s.read.throughput > 0);
}

test('runDemo pushes 4× the memory limit through the store and verifies every byte', async (t) => {
  const directory = await tempDir(t);
  const progress: string[] = [];
  const s = await runDemo({
    memoryLimit: 16 * MiB,
    valueSize: MiB,
    directory,
    onProgress: (phase, done, total) => {
      if (done === total) progress.push(phase);
    },
  });
  assertSpilledAndVerified(s, 16 * MiB);
  assert.deepEqual(progress, ['write', 'read']);
  // The store is closed: its spill folder is gone.
  assert.deepEqual(await fsp.readdir(directory), []);
});

test('runDemo rejects bad sizes with InvalidArgumentError', async () => {
  await assert.rejects(runDemo({ memoryLimit: 0, valueSize: MiB }), InvalidArgumentError);
  await assert.rejects(runDemo({ memoryLimit: MiB, valueSize: 8 * MiB }), /larger than the data size/);
});

test('the CLI prints a one-line JSON summary', async (t) => {
  const directory = await tempDir(t);
  const { code, stdout, stderr } = await cli(['demo', '--memory-limit', '16MiB', '--value-size', '1MiB', '--json', '--directory', directory]);
  assert.equal(code, 0, stderr);
  const lines = stdout.trim().split('\n');
  assert.equal(lines.length, 1);
  assertSpilledAndVerified(JSON.parse(lines[0]) as DemoSummary, 16 * MiB);
  assert.deepEqual(await fsp.readdir(directory), []);
});

test('a bad --memory-limit exits with code 2 and says why', async () => {
  const { code, stdout, stderr } = await cli(['demo', '--memory-limit', 'abc']);
  assert.equal(code, 2);
  assert.equal(stdout, '');
  assert.match(stderr, /--memory-limit/);
  assert.match(stderr, /cannot read "abc" as a size/);
});
