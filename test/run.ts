/**
 * Runs one suite's test files: `cluster` is the folders whose tests start a scheduler,
 * workers, whole clusters or the CLI (real processes, threads and sockets: the slow part),
 * `unit` every other folder, so a folder added later is never left out of both.
 * Arguments after the suite's name go to `node --test` (a reporter, a name pattern).
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

const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', ...extra, ...files], { stdio: 'inherit' });
child.on('exit', (code, signal) => process.exit(code ?? (signal === null ? 1 : 128)));
