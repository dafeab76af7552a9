/** A worker started without the cluster's token is a configuration error (exit 2), not a crash to restart (1). */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const main = path.join(root, 'src/cli/main.ts');

function cli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', main, ...args], { cwd: root, timeout: 60_000, env }, (err, _stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stderr });
    });
  });
}

test('a missing or wrong token exits with code 2 and says why', async () => {
  const scheduler = spawn(process.execPath, ['--import', 'tsx', main, 'scheduler', '--port', '0'], {
    cwd: root,
    env: { ...process.env, SPILLWAY_TOKEN: 'the-secret' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const listening = await new Promise<Record<string, unknown>>((resolve) => {
      let text = '';
      scheduler.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        text += chunk;
        if (text.includes('\n')) resolve(JSON.parse(text.split('\n')[0]) as Record<string, unknown>);
      });
    });
    const address = listening.address as { host: string; port: number };
    const env = { ...process.env };
    delete env.SPILLWAY_TOKEN;
    const args = ['worker', '--scheduler', `${address.host}:${address.port}`, '--memory-limit', '64MiB', '--nthreads', '1'];
    const missing = await cli(args, env);
    assert.equal(missing.code, 2, missing.stderr);
    assert.match(missing.stderr, /requires a token/);
    const wrong = await cli(args, { ...env, SPILLWAY_TOKEN: 'not-it' });
    assert.equal(wrong.code, 2, wrong.stderr);
    assert.match(wrong.stderr, /wrong token/);
  } finally {
    scheduler.kill('SIGTERM');
    await once(scheduler, 'exit');
  }
});
