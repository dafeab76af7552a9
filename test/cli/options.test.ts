import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { duration, niceIncrement, positiveDuration } from '../../src/cli/options.js';
import { repoRoot } from '../helpers/suite.js';

test('--thread-nice takes a whole number from 0 to 19', () => {
  assert.equal(niceIncrement('0'), 0);
  assert.equal(niceIncrement('19'), 19);
  for (const bad of ['20', '-1', '2.5', 'ten', '']) assert.throws(() => niceIncrement(bad), /expected/, bad);
});

test('command-line sizes and durations take units: <size> (64MiB) and <duration> (500ms, 2s)', () => {
  // Every flag is declared in src/cli as a '--name <value>' string: read them all there.
  const folder = path.join(repoRoot, 'src/cli');
  const flags = fs.readdirSync(folder).flatMap((file) => [...fs.readFileSync(path.join(folder, file), 'utf8').matchAll(/'--([a-z-]+) <([a-z:-]+)>'/g)]);
  assert.ok(flags.length > 20, `the flags were found (${flags.length})`);
  const offences: string[] = [];
  for (const [, flag, value] of flags) {
    if (/(interval|timeout|delay|backoff|after)$/.test(flag) && value !== 'duration') offences.push(`--${flag} <${value}>: a duration`);
    if (/(size|limit|max-spill|bytes|data)$/.test(flag) && value !== 'size') offences.push(`--${flag} <${value}>: a size`);
    if (value === 'ms' || value === 'bytes') offences.push(`--${flag} <${value}>: a unit, not a parsed value`);
  }
  assert.deepEqual(offences, []);
});

test('durations on the command line: 500ms, 2s, 2m, or a number of milliseconds', () => {
  assert.equal(duration('500ms'), 500);
  assert.equal(duration('2s'), 2000);
  assert.equal(duration('2m'), 120_000);
  assert.equal(duration('250'), 250);
  assert.equal(duration('0'), 0);
  assert.equal(positiveDuration('1s'), 1000);
  for (const bad of ['0', '0ms']) assert.throws(() => positiveDuration(bad), /at least 1 ms/, bad);
  for (const bad of ['2 weeks', 'soon', '-1s', '']) assert.throws(() => duration(bad), /expected a duration/, bad);
});
