import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setImmediate as tick } from 'node:timers/promises';
import { test } from 'node:test';
import { garbageCollector } from '../../src/runtime/garbage-collection.js';
import { nodeImports, suiteModule } from '../helpers/suite.js';

test('garbageCollector is available and frees an unreachable buffer', async () => {
  const collectGarbage = garbageCollector();
  assert.equal(typeof collectGarbage, 'function');
  const ref = await (async () => new WeakRef(new Float64Array(1024 * 1024)))();
  await tick(); // a WeakRef target survives the job that created it
  collectGarbage?.();
  assert.equal(ref.deref(), undefined);
});

test('garbageCollector returns the same function every time', () => {
  assert.equal(garbageCollector(), garbageCollector());
});

/**
 * In a fresh process: whether a new context has `gc` (V8's --expose-gc is set) after
 * importing spillway, after opening a store without collectGarbage, and after opening one with it.
 */
const PROBE = `
import vm from 'node:vm';
const exposed = () => vm.runInNewContext('typeof gc') === 'function';
const seen = [];
const { SpillStore } = await import(process.argv[1]);
await import(process.argv[2]);
seen.push(exposed());
const plain = await SpillStore.open({ memoryLimit: '16 MiB', monitorIntervalMs: false });
seen.push(exposed());
await plain.close();
const collecting = await SpillStore.open({ memoryLimit: '16 MiB', monitorIntervalMs: false, collectGarbage: true });
seen.push(exposed());
await collecting.close();
console.log(JSON.stringify(seen));
`;

test('importing spillway leaves V8 flags alone; a store opened with collectGarbage exposes gc', async () => {
  const child = spawn(process.execPath, [...nodeImports, '--input-type=module', '-e', PROBE, suiteModule('src/index'), suiteModule('src/worker/index')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const [code] = await once(child, 'exit');
  assert.equal(code, 0);
  assert.deepEqual(JSON.parse(out), [false, false, true]);
});
