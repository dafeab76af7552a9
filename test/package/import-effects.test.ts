/**
 * Importing the package changes nothing in the process: no environment read, no listener,
 * no handle or timer, no V8 flag, and no native binding loaded before first use.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { repoRoot } from '../helpers/suite.js';
import { assertBuilt, runScript, specifiers } from './built.js';

interface Effects {
  envReads: string[];
  listeners: string[];
  resources: string[];
  loaded: string[];
  exposedGc: boolean;
}

test('importing every entry point reads no environment, adds no listener, handle or native module', async () => {
  assertBuilt();
  const script = `
    import { createRequire } from 'node:module';
    import vm from 'node:vm';
    const dist = ${JSON.stringify(`${repoRoot}/dist/`)};
    const envReads = [];
    const real = process.env;
    // A read counts when the first frame outside Node and this script is in dist/.
    const record = (key) => {
      const frames = (new Error().stack ?? '').split('\\n').slice(2);
      const caller = frames.find((f) => !f.includes('node:') && !f.includes('[eval'));
      if (caller !== undefined && caller.includes(dist)) envReads.push(String(key) + ' at ' + caller.trim());
    };
    process.env = new Proxy(real, {
      get: (target, key) => (record(key), Reflect.get(target, key)),
      has: (target, key) => (record(key), Reflect.has(target, key)),
      ownKeys: (target) => (record('*'), Reflect.ownKeys(target)),
    });
    const events = ['exit', 'beforeExit', 'SIGINT', 'SIGTERM', 'warning', 'uncaughtException', 'unhandledRejection'];
    const listenersBefore = events.map((e) => process.listenerCount(e));
    // Loading node:assert (piscina and pino's streams do) opens stderr: stdio is open from the start.
    void process.stdout, process.stderr;
    const resourcesBefore = process.getActiveResourcesInfo().sort();
    for (const name of ${JSON.stringify(specifiers)}) await import(name);
    process.env = real;
    // The loader's own file reads finish within a few turns.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const cache = Object.keys(createRequire(dist).cache);
    process.stdout.write(JSON.stringify({
      envReads,
      listeners: events.filter((e, i) => process.listenerCount(e) !== listenersBefore[i]),
      resources: process.getActiveResourcesInfo().sort().filter((r, i, all) => all.filter((x) => x === r).length > resourcesBefore.filter((x) => x === r).length),
      exposedGc: vm.runInNewContext('typeof gc') !== 'undefined',
      loaded: cache.filter((file) => /[\\\\/](lz4-napi|@node-rs[\\\\/]xxhash)[\\\\/]/.test(file)),
    }));
  `;
  const effects = await runScript<Effects>(script);
  assert.deepEqual(effects.envReads, [], 'environment read at import');
  assert.deepEqual(effects.listeners, [], 'process listeners added at import');
  assert.deepEqual(effects.resources, [], 'handles or timers left by import');
  assert.deepEqual(effects.loaded, [], 'native bindings loaded before first use');
  assert.equal(effects.exposedGc, false, 'V8 flags (--expose-gc) set at import');
});
