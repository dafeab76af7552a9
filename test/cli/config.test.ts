/** Every flag from SPILLWAY_<FLAG>, --version, and the new value forms (auto, fractions, Gi, off, durations). */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { duration, levelOrOff, memoryLimit, sizeOrOff } from '../../src/cli/options.js';
import { repoRoot } from '../helpers/suite.js';
import { cli } from './helpers.js';

const env = (extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv => {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('SPILLWAY_')));
  return { ...clean, ...extra };
};

test('spillway --version prints the package version', async () => {
  const { version } = JSON.parse(await readFile(`${repoRoot}/package.json`, 'utf8')) as { version: string };
  for (const flag of ['--version', '-V']) {
    const result = await cli([flag]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout.trim(), version);
  }
});

test('--help names every flag\'s SPILLWAY_* variable', async () => {
  const result = await cli(['worker', '--help']);
  assert.equal(result.code, 0);
  for (const name of ['SPILLWAY_SCHEDULER', 'SPILLWAY_MEMORY_LIMIT', 'SPILLWAY_TARGET', 'SPILLWAY_MAX_SPILL', 'SPILLWAY_CONNECT_TIMEOUT', 'SPILLWAY_CONTACT_ADDRESS']) {
    assert.match(result.stdout.replace(/\s+/g, ' '), new RegExp(`env: ${name}\\)`), name);
  }
});

test('a flag from the environment is used, a bad value exits 2 naming the variable, the command line wins', async () => {
  // The worker's required flags from the environment: it tries the scheduler, which is not there.
  const unreachable = await cli(['worker'], { env: env({ SPILLWAY_SCHEDULER: '127.0.0.1:9', SPILLWAY_MEMORY_LIMIT: '64Mi', SPILLWAY_CONNECT_TIMEOUT: '300ms' }) });
  assert.equal(unreachable.code, 2, unreachable.stderr);
  assert.match(unreachable.stderr, /could not reach the scheduler at 127\.0\.0\.1:9 within 300 ms/);
  const bad = await cli(['worker'], { env: env({ SPILLWAY_SCHEDULER: '127.0.0.1:9', SPILLWAY_MEMORY_LIMIT: 'lots' }) });
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /from env 'SPILLWAY_MEMORY_LIMIT' is invalid/);
  const badPort = await cli(['scheduler'], { env: env({ SPILLWAY_PORT: 'eighty' }) });
  assert.equal(badPort.code, 2);
  assert.match(badPort.stderr, /SPILLWAY_PORT/);
  // The flag wins over the variable: the bad variable is never parsed.
  const flagWins = await cli(['worker', '--memory-limit', '64Mi', '--connect-timeout', '200ms'], { env: env({ SPILLWAY_SCHEDULER: '127.0.0.1:9', SPILLWAY_MEMORY_LIMIT: 'lots' }) });
  assert.match(flagWins.stderr, /within 200 ms/);
});

test('a switch from the environment takes on/off words only; unknown SPILLWAY_* names are warned about', async () => {
  const bad = await cli(['demo'], { env: env({ SPILLWAY_JSON: 'maybe' }) });
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /SPILLWAY_JSON="maybe" \(for --json\) must be/);
  const typo = await cli(['--version'], { env: env({ SPILLWAY_MEMORY_LIMT: '1Gi' }) });
  assert.equal(typo.code, 0);
  assert.match(typo.stderr, /warning: SPILLWAY_MEMORY_LIMT matches no flag/);
});

test('value forms: memory limits, store levels, sizes or off, durations', () => {
  for (const ok of ['auto', 'AUTO', '0.5', '.25', '1.0', '4Gi', '512 MiB', '1Ti', '4096']) assert.equal(memoryLimit(ok), ok.trim());
  for (const bad of ['0', 'lots', '-1', '2.5x']) assert.throws(() => memoryLimit(bad), /auto/, bad);
  assert.equal(levelOrOff('0.6'), 0.6);
  assert.equal(levelOrOff('off'), false);
  for (const bad of ['1.5', '-0.1', 'high', '']) assert.throws(() => levelOrOff(bad), /fraction/, bad);
  assert.equal(sizeOrOff('10Gi'), 10 * 2 ** 30);
  assert.equal(sizeOrOff('off'), false);
  assert.equal(duration('120s'), 120_000);
  assert.equal(duration('2m'), 120_000);
  assert.equal(duration('500ms'), 500);
  assert.equal(duration('750'), 750);
  for (const bad of ['soon', '5 days', '-1s']) assert.throws(() => duration(bad), /duration/, bad);
});
