/** A worker started without the cluster's token is a configuration error (exit 2), not a crash to restart (1). */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { cli, firstJsonLine, spawnCli } from './helpers.js';



test('a missing or wrong token exits with code 2 and says why', async () => {
  const scheduler = spawnCli(['scheduler', '--port', '0'], { env: { ...process.env, SPILLWAY_TOKEN: 'the-secret' } });
  try {
    const listening = await firstJsonLine(scheduler);
    const address = listening.address as { host: string; port: number };
    const env = { ...process.env };
    delete env.SPILLWAY_TOKEN;
    const args = ['worker', '--scheduler', `${address.host}:${address.port}`, '--memory-limit', '64MiB', '--nthreads', '1'];
    const missing = await cli(args, { env });
    assert.equal(missing.code, 2, missing.stderr);
    assert.match(missing.stderr, /requires a token/);
    const wrong = await cli(args, { env: { ...env, SPILLWAY_TOKEN: 'not-it' } });
    assert.equal(wrong.code, 2, wrong.stderr);
    assert.match(wrong.stderr, /wrong token/);
  } finally {
    scheduler.kill('SIGTERM');
    await once(scheduler, 'exit');
  }
});
