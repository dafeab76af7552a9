/**
 * The cluster's processes start without compiling apache-arrow (about 150 modules, a few
 * MiB of heap each process would carry through every collection) or cli-progress: the
 * command line's own start and the scheduler and worker commands import neither; only the
 * TPC-H workloads (in the process that plans them) and Arrow values load Arrow, and only
 * `demo` and `local` draw progress bars.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { repoRoot } from '../helpers/suite.js';
import { assertBuilt } from './built.js';

const run = promisify(execFile);

/** Writes a module hook that appends every URL Node loads to the file named by LOADED_LOG; returns its path. */
async function writeLoadHook(dir: string): Promise<string> {
  const hook = path.join(dir, 'hook.mjs');
  const loader = `import { appendFileSync } from 'node:fs'; export async function load(url, context, next) { appendFileSync(process.env.LOADED_LOG, url + '\\n'); return next(url, context); }`;
  await fs.writeFile(hook, `import { register } from 'node:module';\nregister('data:text/javascript,' + encodeURIComponent(${JSON.stringify(loader)}));\n`);
  return hook;
}

/** The modules of apache-arrow and cli-progress Node loads while running `args` under `hook`. */
async function unwantedModulesLoaded(hook: string, args: string[]): Promise<string[]> {
  const log = path.join(path.dirname(hook), `loaded-${Math.random().toString(36).slice(2)}.txt`);
  await fs.writeFile(log, '');
  await run(process.execPath, ['--import', hook, ...args], { cwd: repoRoot, timeout: 60_000, env: { ...process.env, NODE_OPTIONS: '', LOADED_LOG: log } });
  const loaded = (await fs.readFile(log, 'utf8')).split('\n').filter((url) => url !== '');
  assert.ok(loaded.some((url) => url.includes('/dist/')), `the hook saw the run load Spillway's modules (${loaded.length} loaded)`);
  return loaded.filter((url) => url.includes('/apache-arrow/') || url.includes('/cli-progress/'));
}

const importing = (...files: string[]): string[] => ['--input-type=module', '-e', files.map((f) => `await import(${JSON.stringify(path.join(repoRoot, 'dist', f))});`).join('\n')];

test('the command line, the scheduler and the worker start without apache-arrow or the progress bars', async (t) => {
  assertBuilt();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'spillway-startup-'));
  t.after(() => fs.rm(dir, { recursive: true, force: true }));
  const hook = await writeLoadHook(dir);
  assert.deepEqual(await unwantedModulesLoaded(hook, [path.join(repoRoot, 'dist', 'cli', 'main.js'), '--version']), [], 'loaded by the command line');
  assert.deepEqual(await unwantedModulesLoaded(hook, importing('cli/scheduler-command.js', 'cli/worker-command.js', 'index.js')), [], 'loaded by the cluster commands');
  // The hook does see apache-arrow where it is imported: the planner of the TPC-H workloads.
  assert.ok((await unwantedModulesLoaded(hook, importing('workloads/index.js'))).length > 100, 'the workloads import Arrow');
  assert.ok((await unwantedModulesLoaded(hook, importing('cli/demo-command.js'))).length > 0, 'the demo imports cli-progress');
});

/** Runs `script` as an ES module with plain node against the build; returns its stdout. */
async function runScript(script: string, ...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script, ...args], { cwd: repoRoot, timeout: 60_000, env: { ...process.env, NODE_OPTIONS: '' } });
  return stdout;
}

test('an Arrow value loads the one build of apache-arrow it comes from, and a worker\'s loop loads none', async () => {
  assertBuilt();
  const dist = (file: string): string => JSON.stringify(path.join(repoRoot, 'dist', file));
  // The application imports Arrow's ES build; the CommonJS one is about 150 modules more.
  const encoded = await runScript(
    [
      "import * as arrow from 'apache-arrow';",
      "import { createRequire } from 'node:module';",
      `const { encodeToBuffer } = await import(${dist('transfer/index.js')});`,
      "const bytes = await encodeToBuffer(arrow.tableFromArrays({ x: new Int32Array([1, 2, 3]) }));",
      "const cjs = Object.keys(createRequire(import.meta.url).cache).filter((file) => file.includes('/apache-arrow/'));",
      "console.log(JSON.stringify({ cjs: cjs.map((file) => file.slice(file.lastIndexOf('/') + 1)), bytes: bytes.toString('base64') }));",
    ].join('\n'),
  );
  const { cjs, bytes } = JSON.parse(encoded) as { cjs: string[]; bytes: string };
  assert.deepEqual(cjs, ['Arrow.node.mjs'], 'only the ES build, through require(esm)');

  // A worker's event loop keeps the value encoded: it never resolves apache-arrow.
  const kept = await runScript(
    [
      "import Module from 'node:module';",
      'let resolved = false;',
      'const resolve = Module._resolveFilename;',
      "Module._resolveFilename = function (request, ...rest) { if (request.includes('apache-arrow')) resolved = true; return resolve.call(this, request, ...rest); };",
      `const { encodeToBuffer, decodeVerified } = await import(${dist('transfer/index.js')});`,
      `const { keepTypedValuesEncoded, EncodedTypedValue } = await import(${dist('codec/types.js')});`,
      'keepTypedValuesEncoded(true);',
      "const bytes = Buffer.from(process.argv[1], 'base64');",
      'const value = await decodeVerified(bytes);',
      'const again = await encodeToBuffer(value);',
      'console.log(JSON.stringify({ kept: value instanceof EncodedTypedValue, name: value.name, same: again.equals(bytes), resolved }));',
    ].join('\n'),
    bytes,
  );
  assert.deepEqual(JSON.parse(kept), { kept: true, name: 'spillway.arrow', same: true, resolved: false });
});
