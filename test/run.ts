/**
 * Runs one suite's test files: `cluster` is the folders whose tests start a scheduler,
 * workers, whole clusters or the CLI (real processes, threads and sockets: the slow part),
 * `unit` every other folder, so a folder added later is never left out of both.
 * Arguments after the suite's name go to `node --test` (a reporter, a name pattern).
 * Unless a reporter is given, the run ends with a line naming its slowest files.
 *
 * The tests run compiled: TypeScript compiles the project into build/ first (incrementally,
 * and only when a source is newer than the last compile). Through tsx every test file, every
 * process a test starts and every task thread in it would load tsx and pass each module
 * through its hooks, about a second of CPU each, a large part of the suites' time on two
 * cores. A single file still runs from its source: `node --import tsx --test
 * test/x/y.test.ts` (test/helpers/suite.ts keeps both ways pointing at the same modules).
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { newestMtime } from './helpers/mtime.js';
import { repoRoot } from './helpers/suite.js';

const CLUSTER_FOLDERS = new Set(['cli', 'cluster', 'dashboard', 'net', 'scheduler', 'shuffle', 'worker']);
/** What the compile reads: a change to any of them compiles again. */
const SOURCES = ['src', 'test', 'benchmarks', 'examples'];

const [suite, ...extra] = process.argv.slice(2);
if (suite !== 'unit' && suite !== 'cluster') {
  console.error('usage: node --import tsx test/run.ts <unit|cluster> [node --test options]');
  process.exit(2);
}

const testDir = import.meta.dirname;
const build = path.join(repoRoot, 'build');
// tsc writes it at the end of every compile, one that finds nothing to do included.
const stamp = path.join(build, '.tsbuildinfo');

function newestSource(): number {
  const tsconfig = fs.statSync(path.join(repoRoot, 'tsconfig.json')).mtimeMs;
  return Math.max(tsconfig, newestMtime(SOURCES.map((folder) => path.join(repoRoot, folder)), /\.(ts|mts|json)$/));
}

if (!fs.existsSync(stamp) || fs.statSync(stamp).mtimeMs < newestSource()) {
  const tsc = spawnSync(process.execPath, [path.join(repoRoot, 'node_modules/typescript/bin/tsc'), '-p', path.join(repoRoot, 'tsconfig.json')], { stdio: 'inherit' });
  if (tsc.status !== 0) process.exit(tsc.status ?? 1);
}
// Compiled, src/ sits one folder deeper than in the package (build/src/ against dist/): what
// it finds beside the package's root (its package.json, the dashboard's static files, the
// node_modules folder shipped modules resolve from) is linked there.
for (const name of ['package.json', 'static', 'node_modules']) {
  const link = path.join(build, name);
  if (!fs.existsSync(link)) fs.symlinkSync(path.join('..', name), link);
}

const files = fs
  .readdirSync(testDir, { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && CLUSTER_FOLDERS.has(entry.name) === (suite === 'cluster'))
  .flatMap((folder) =>
    fs
      .readdirSync(path.join(testDir, folder.name))
      .filter((name) => name.endsWith('.test.ts'))
      .map((name) => path.join('build', 'test', folder.name, name.replace(/\.ts$/, '.js'))),
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
      `--test-reporter=${path.join(testDir, 'slowest-files.mjs')}`,
      '--test-reporter-destination=stdout',
    ];
// Source maps put a failure's stack on the TypeScript lines.
const child = spawn(process.execPath, ['--enable-source-maps', '--test', '--test-concurrency=2', ...reporters, ...extra, ...files], { cwd: repoRoot, stdio: 'inherit' });
child.on('exit', (code, signal) => process.exit(code ?? (signal === null ? 1 : 128)));
