/**
 * Code shipping with real processes: workers started from the built dist/ under plain node
 * (no tsx), in empty folders, run modules the client bundled and uploaded.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { access, rm, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { pathToFileURL } from 'node:url';
import { Client } from '../../src/client/client.js';
import { TaskError } from '../../src/errors.js';
import { Scheduler } from '../../src/scheduler/index.js';
import { ModuleBundleError, ModuleRefusedError, UnknownModuleError } from '../../src/shipping/errors.js';
import { Worker } from '../../src/worker/index.js';
import { firstJsonLine } from '../cli/helpers.js';
import { repoRoot } from '../helpers/suite.js';
import { tempDir } from '../helpers/temp-dir.js';
import { alive } from '../helpers/proc.js';

const TOKEN = 'shipping-test';
const distMain = path.join(repoRoot, 'dist/cli/main.js');

/** A worker from dist/ under plain node (no supervisor: the task's pid is its own), its working directory an empty folder of its own. */
async function startDistWorker(t: TestContext, scheduler: Scheduler): Promise<{ child: ChildProcess; pid: number; cwd: string }> {
  const cwd = await tempDir(t, 'spillway-ship-cwd-');
  const child = spawn(process.execPath, [distMain, 'worker', '--scheduler', `127.0.0.1:${scheduler.address.port}`, '--memory-limit', '64MiB', '--nthreads', '1', '--no-supervisor'], {
    cwd,
    env: { ...process.env, SPILLWAY_TOKEN: TOKEN, SPILLWAY_EXIT_WITH_STDIN: '1', NODE_OPTIONS: '' },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGINT'); // closes at once (SIGTERM retires it, handing its data on first)
      await exited;
    }
    assert.equal(alive(child.pid ?? -1), false);
  });
  const ready = await firstJsonLine(child);
  assert.equal(ready.event, 'ready', JSON.stringify(ready));
  return { child, pid: child.pid ?? -1, cwd };
}

const HELPER = `export const label = (v: string): string => \`version \${v}\`;\n`;

/** A TypeScript task module with a relative import, a package import and an import of spillway. */
function tasksSource(version: string): string {
  return [
    `import { label } from './helper.ts';`,
    `import { formatBytes } from 'spillway';`,
    `import { Packr } from 'msgpackr';`,
    `interface Where { label: string; pid: number; cwd: string; tsx: boolean; bytes: string; packed: number }`,
    `export function where(): Where {`,
    `  const packed: number = new Packr().pack({ a: 1 }).length;`,
    `  return { label: label('${version}'), pid: process.pid, cwd: process.cwd(), tsx: process.execArgv.some((a) => a.includes('tsx')), bytes: formatBytes(2048), packed };`,
    `}`,
    `export const add = (a: number, b: number): number => a + b;`,
    '',
  ].join('\n');
}

test('shipped modules: bundled TypeScript runs on workers with no copy of it and no tsx; an edit runs on the same workers; a late worker gets them', async (t) => {
  await access(distMain).catch(() => assert.fail(`${distMain} is missing: run npm run build first`));
  const scheduler = await Scheduler.start({ token: TOKEN });
  t.after(() => scheduler.close());
  const first = await startDistWorker(t, scheduler);
  const client = await Client.connect(scheduler.address, { token: TOKEN });
  t.after(() => client.close());

  const code = await tempDir(t, 'spillway-ship-code-');
  const url = pathToFileURL(path.join(code, 'tasks.ts')).href;
  await writeFile(path.join(code, 'helper.ts'), HELPER);
  await writeFile(path.join(code, 'tasks.ts'), tasksSource('1'));
  const shipped = await client.uploadModule(url);
  assert.match(shipped.module, /^spillway:module\/[0-9a-f]{64}$/);
  assert.equal(shipped.url, url);
  // The code exists nowhere on disk now but in the workers' caches.
  await rm(code, { recursive: true });

  // A worker that joins after the upload gets it; the first leaves, so the late one runs the task.
  const late = await startDistWorker(t, scheduler);
  const exited = new Promise((resolve) => first.child.once('exit', resolve));
  first.child.kill('SIGINT');
  await exited;
  const [v1] = await client.compute<{ label: string; pid: number; cwd: string; tsx: boolean; bytes: string; packed: number }>({ w: { fn: { module: shipped.module, name: 'where' } } }, ['w']);
  assert.equal(v1.label, 'version 1');
  assert.equal(v1.pid, late.pid);
  assert.equal(v1.cwd, late.cwd);
  assert.equal(v1.tsx, false, 'the worker runs without tsx');
  assert.equal(v1.bytes, '2.0 KiB');
  assert.ok(v1.packed > 0);

  // An edit, named by its URL: shipped automatically under a new address, run without restarting the worker.
  await mkdir(code);
  await writeFile(path.join(code, 'helper.ts'), HELPER);
  await writeFile(path.join(code, 'tasks.ts'), tasksSource('2'));
  const [v2, sum] = await client.compute<unknown>({ w: { fn: { module: url, name: 'where' } }, s: { fn: { module: url, name: 'add' }, args: [2, 3] } }, ['w', 's']);
  assert.equal((v2 as { label: string }).label, 'version 2');
  assert.equal((v2 as { pid: number }).pid, late.pid);
  assert.equal(sum, 5);
  // An edit to a file it imports counts too.
  await writeFile(path.join(code, 'helper.ts'), `export const label = (v: string): string => \`edited helper \${v}\`;\n`);
  const [v3] = await client.compute<{ label: string }>({ w: { fn: { module: url, name: 'where' } } }, ['w']);
  assert.equal(v3.label, 'edited helper 2');
  // Every version is labelled by the file it came from, not by its address.
  assert.deepEqual(new Set(scheduler.tasks.since(0).map((entry) => entry.fn)), new Set(['tasks.where', 'tasks.add']));

  // Failures, each naming the module: bundling (on the client), importing (on the worker, which survives).
  const broken = pathToFileURL(path.join(code, 'broken.ts')).href;
  await writeFile(path.join(code, 'broken.ts'), 'export function f( {\n');
  await assert.rejects(client.uploadModule(broken), (err: unknown) => {
    assert.ok(err instanceof ModuleBundleError, String(err));
    assert.equal(err.code, 'SPW_ERR_MODULE_BUNDLE');
    assert.equal(err.module, broken);
    assert.match(err.message, /broken\.ts:\d+:\d+: Expected/);
    return true;
  });
  await assert.rejects(client.compute({ b: { fn: { module: broken, name: 'f' } } }, ['b']), ModuleBundleError);
  const unimportable = pathToFileURL(path.join(code, 'unimportable.ts')).href;
  await writeFile(path.join(code, 'unimportable.ts'), `import 'spillway-no-such-package';\nexport const f = (): number => 1;\n`);
  await assert.rejects(client.compute({ u: { fn: { module: unimportable, name: 'f' } } }, ['u']), (err: unknown) => {
    assert.ok(err instanceof TaskError, String(err));
    assert.equal(err.remoteCode, 'SPW_ERR_TASK_IMPORT');
    assert.ok(err.message.includes(unimportable), err.message);
    return true;
  });
  await assert.rejects(client.compute({ m: { fn: { module: url, name: 'missing' } } }, ['m']), /has no exported function "missing"/);
  const [again] = await client.compute<number>({ s: { fn: { module: url, name: 'add' }, args: [20, 22] } }, ['s']);
  assert.equal(again, 42, 'the worker survived');
  assert.equal(late.child.exitCode, null);
});

test('allow-lists judge shipped modules by the URL they were uploaded from, on the scheduler and on the worker', async (t) => {
  const code = await tempDir(t, 'spillway-ship-allow-');
  const url = pathToFileURL(path.join(code, 'tasks.ts')).href;
  await writeFile(path.join(code, 'tasks.ts'), `export const add = (a: number, b: number): number => a + b;\n`);

  const strict = await Scheduler.start({ token: TOKEN, allowModules: ['file:///srv/jobs/', 'node:'] });
  t.after(() => strict.close());
  const refused = await Client.connect(strict.address, { token: TOKEN });
  t.after(() => refused.close());
  await assert.rejects(refused.uploadModule(url), (err: unknown) => {
    assert.ok(err instanceof ModuleRefusedError, String(err));
    assert.equal(err.code, 'SPW_ERR_MODULE_REFUSED');
    assert.ok(err.message.includes(url) && err.message.includes('file:///srv/jobs/'), err.message);
    return true;
  });
  await assert.rejects(refused.compute({ a: { fn: { module: url, name: 'add' }, args: [1, 2] } }, ['a']), ModuleRefusedError);
  assert.equal(strict.state().tasks.total ?? 0, 0, 'nothing ran');

  const open = await Scheduler.start({ token: TOKEN });
  t.after(() => open.close());
  const worker = await Worker.start({ scheduler: open.address, token: TOKEN, memoryLimit: '32 MiB', nthreads: 1, monitorIntervalMs: false, allowModules: 'file:///srv/jobs/' });
  t.after(() => worker.close());
  const client = await Client.connect(open.address, { token: TOKEN });
  t.after(() => client.close());
  await assert.rejects(client.compute({ a: { fn: { module: url, name: 'add' }, args: [1, 2] } }, ['a']), (err: unknown) => {
    assert.ok(err instanceof TaskError, String(err));
    assert.equal(err.remoteCode, 'SPW_ERR_MODULE_REFUSED');
    assert.ok(err.message.includes(url) && err.message.includes("worker's allow-list"), err.message);
    return true;
  });
});

test('a module the scheduler dropped beyond its cache limit is uploaded again by the client, which resubmits', async (t) => {
  const code = await tempDir(t, 'spillway-ship-evict-');
  const a = pathToFileURL(path.join(code, 'a.ts')).href;
  const b = pathToFileURL(path.join(code, 'b.ts')).href;
  // Each bundle is over half the limit: uploading one drops the other.
  const padding = `export const padding = '${'x'.repeat(700)}';\n`;
  await writeFile(path.join(code, 'a.ts'), `${padding}export const f = (): string => 'a';\n`);
  await writeFile(path.join(code, 'b.ts'), `${padding}export const f = (): string => 'b';\n`);
  const scheduler = await Scheduler.start({ token: TOKEN, moduleCacheLimit: 1200 });
  t.after(() => scheduler.close());
  const worker = await Worker.start({ scheduler: scheduler.address, token: TOKEN, memoryLimit: '32 MiB', nthreads: 1, monitorIntervalMs: false });
  t.after(() => worker.close());
  const client = await Client.connect(scheduler.address, { token: TOKEN });
  t.after(() => client.close());
  const shippedA = await client.uploadModule(a);
  assert.deepEqual(await client.compute({ a: { fn: { module: a, name: 'f' } } }, ['a']), ['a']);
  assert.deepEqual(await client.compute({ b: { fn: { module: b, name: 'f' } } }, ['b']), ['b']);
  // The scheduler now holds b only: another client naming a's address is refused...
  const other = await Client.connect(scheduler.address, { token: TOKEN });
  t.after(() => other.close());
  await assert.rejects(other.compute({ x: { fn: { module: shippedA.module, name: 'f' } } }, ['x']), (err: unknown) => {
    assert.ok(err instanceof UnknownModuleError, String(err));
    assert.equal(err.code, 'SPW_ERR_MODULE_UNKNOWN');
    return true;
  });
  // ...while the client that shipped it, believing it there, uploads it again.
  assert.deepEqual(await client.compute({ a2: { fn: { module: a, name: 'f' } } }, ['a2']), ['a']);
});
