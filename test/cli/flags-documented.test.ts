/** docs/configuration.md describes every flag of every `spillway` command (checked against --help). */
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '../helpers/suite.js';
import { cli } from './helpers.js';

/** The flags a command's --help lists, without --help itself. */
async function flagsOf(command: string): Promise<string[]> {
  const help = await cli([command, '--help']);
  assert.equal(help.code, 0, help.stderr);
  const flags = new Set([...help.stdout.matchAll(/^\s+(?:-\w, )?(--[a-z-]+)/gm)].map((m) => m[1]));
  flags.delete('--help');
  return [...flags];
}

for (const command of ['scheduler', 'worker', 'local', 'demo', 'clean']) {
  test(`docs/configuration.md has a row for every flag of spillway ${command}`, async () => {
    const docs = await fsp.readFile(path.join(repoRoot, 'docs/configuration.md'), 'utf8');
    const documented = new Set([...docs.matchAll(/^\|[^|]*\|/gm)].flatMap((row) => [...row[0].matchAll(/`(--[a-z-]+)/g)].map((m) => m[1])));
    const flags = await flagsOf(command);
    assert.ok(flags.length >= 4, `--help lists ${flags.length} flags`);
    assert.ok(flags.includes('--log-level'), `spillway ${command} takes --log-level`);
    assert.deepEqual(flags.filter((flag) => !documented.has(flag)), []);
  });
}
