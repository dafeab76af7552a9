/**
 * Runs one suite's test files: `cluster` is the folders whose tests start a scheduler,
 * workers, whole clusters or the CLI (real processes, threads and sockets: the slow part),
 * `unit` every other folder, so a folder added later is never left out of both.
 * Arguments after the suite's name go to `node --test` (a reporter, a name pattern).
 * Unless a reporter is given, the run ends with a line naming its slowest files.
 */
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';

const CLUSTER_FOLDERS = new Set(['cli', 'cluster', 'dashboard', 'net', 'scheduler', 'shuffle', 'worker']);

const [suite, ...extra] = process.argv.slice(2);
if (suite !== 'unit' && suite !== 'cluster') {
  console.error('usage: node --import tsx test/run.ts <unit|cluster> [node --test options]');
  process.exit(2);
}

const root = import.meta.dirname;
const files = readdirSync(root, { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && CLUSTER_FOLDERS.has(entry.name) === (suite === 'cluster'))
  .flatMap((folder) =>
    readdirSync(path.join(root, folder.name))
      .filter((name) => name.endsWith('.test.ts'))
      .map((name) => path.join('test', folder.name, name)),
  )
  .sort();

// Node's own default reporter (spec on a terminal, TAP otherwise before Node 23), and one
// summary line of the slowest files after it, unless a reporter was asked for.
const major = Number(process.versions.node.split('.')[0]);
const reporters = extra.some((arg) => arg.startsWith('--test-reporter'))
  ? []
  : [
      `--test-reporter=${process.stdout.isTTY || major >= 23 ? 'spec' : 'tap'}`,
      '--test-reporter-destination=stdout',
      `--test-reporter=${path.join(root, 'slowest-files.mjs')}`,
      '--test-reporter-destination=stdout',
    ];
const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', ...reporters, ...extra, ...files], { stdio: 'inherit' });
child.on('exit', (code, signal) => process.exit(code ?? (signal === null ? 1 : 128)));
