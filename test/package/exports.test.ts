/**
 * The export map of the built package against what the README documents: every entry point
 * resolves and exports the names its row lists, the root keeps wire-level pieces out, and
 * the public type declarations hold no `any` and no `const enum` (which consumers compiling
 * with isolatedModules cannot use).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '../helpers/suite.js';
import { assertBuilt, packageJson, runScript, specifiers } from './built.js';
import { publicOptions } from './public-options.js';

/** The README's entry-point table: specifier -> the names it lists. */
function documentedExports(): Map<string, string[]> {
  const readme = fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
  const rows = new Map<string, string[]>();
  for (const match of readme.matchAll(/^\| `(spillway[^`]*)` \| [^|]+ \| (.+) \|$/gm)) {
    rows.set(match[1], [...match[2].matchAll(/`([A-Za-z_]\w*)`/g)].map((m) => m[1]));
  }
  return rows;
}

test('every entry point resolves from the built package and exports what the README lists', async () => {
  assertBuilt();
  const documented = documentedExports();
  assert.deepEqual([...documented.keys()].sort(), [...specifiers].sort(), 'the README lists exactly the entry points of package.json');
  const exported = await runScript<Record<string, string[]>>(`
    const out = {};
    for (const name of ${JSON.stringify(specifiers)}) out[name] = Object.keys(await import(name));
    process.stdout.write(JSON.stringify(out));
  `);
  for (const [specifier, names] of documented) {
    const missing = names.filter((name) => !exported[specifier].includes(name));
    assert.deepEqual(missing, [], `${specifier} lacks what the README lists`);
  }
  for (const wireLevel of ['DataServer', 'DataClient', 'Parser', 'serializer', 'MessageType', 'Methods', 'SlowTier', 'FaultyTier', 'tierContract']) {
    assert.ok(!exported.spillway.includes(wireLevel), `'spillway' does not export ${wireLevel}`);
  }
  const errorClasses = await runScript<string[]>(`
    const modules = [await import(${JSON.stringify(`${repoRoot}/dist/errors.js`)}), await import(${JSON.stringify(`${repoRoot}/dist/transfer/errors.js`)})];
    const { SpillwayError } = modules[0];
    const names = modules.flatMap((m) => Object.entries(m).filter(([, v]) => typeof v === 'function' && v.prototype instanceof SpillwayError).map(([k]) => k));
    process.stdout.write(JSON.stringify(names));
  `);
  assert.ok(errorClasses.length > 10, 'error classes were found');
  assert.deepEqual(errorClasses.filter((name) => !exported.spillway.includes(name)), [], "every error class of src/errors.ts and src/transfer/errors.ts is exported from 'spillway'");
  for (const { types, default: js } of Object.values(packageJson.exports)) {
    assert.ok(fs.existsSync(path.join(repoRoot, types)), `${types} is built`);
    assert.ok(fs.existsSync(path.join(repoRoot, js)), `${js} is built`);
  }
});

/** Every declaration file reachable from the entry points' types. */
function publicDeclarations(): string[] {
  const seen = new Set<string>();
  const pending = Object.values(packageJson.exports).map((entry) => path.join(repoRoot, entry.types));
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    const text = fs.readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)\.js'/g)) pending.push(path.resolve(path.dirname(file), `${m[1]}.d.ts`));
  }
  return [...seen];
}

test('public type declarations use no any and no const enum', () => {
  assertBuilt();
  const files = publicDeclarations();
  assert.ok(files.length > Object.keys(packageJson.exports).length, 'declarations were followed through their imports');
  const offences: string[] = [];
  for (const file of files) {
    const code = fs
      .readFileSync(file, 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/\/\/.*$/gm, '')
      .replace(/'(?:[^'\\\n]|\\.)*'/g, "''");
    for (const line of code.split('\n')) {
      if (/\bconst enum\b/.test(line) || /\bany\b/.test(line)) offences.push(`${path.relative(repoRoot, file)}: ${line.trim()}`);
    }
  }
  assert.deepEqual(offences, []);
});

/** A duration in an option's name (`timeout`, `heartbeatInterval`, `retryDelay`...): it must say Ms. */
const DURATION_NAME = /(timeout|interval|delay|backoff|after|period|deadline|ttl|grace|linger|duration|wait|age|seconds?|secs?)$/i;
/** A byte size in an option's name: it must take '64 MiB' too. */
const BYTE_SIZE_NAME = /(bytes|size|capacity|memoryLimit|maxSpill|memory)$/i;

test('public options name their units: byte sizes take strings, durations end in Ms', () => {
  assertBuilt();
  const options = publicOptions();
  const offences: string[] = [];
  for (const { where, name, type, acceptsNumber, acceptsString } of options) {
    if (!acceptsNumber) continue;
    if (DURATION_NAME.test(name) && !name.endsWith('Ms') && !acceptsString) offences.push(`${where}.${name}: ${type} (a duration ends in Ms)`);
    if (BYTE_SIZE_NAME.test(name) && !acceptsString) offences.push(`${where}.${name}: ${type} (a byte size takes '64 MiB' too)`);
  }
  // The walk must reach every way in, or it would pass by finding nothing.
  const reached = new Set(options.map((o) => o.where.replace(/\(.*$/, '')));
  for (const entry of ['SpillStore.open', 'SpillStore#set', 'new DiskTier', 'new CompressedMemoryTier', 'Client.connect', 'Client#compute', 'LocalCluster.start', 'Scheduler.start', 'Worker.start', 'shuffle', 'DataServer.listen', 'new DataClient', 'new Parser']) {
    assert.ok(reached.has(entry), `the options of ${entry} were checked`);
  }
  assert.ok(options.some((o) => o.where === 'Scheduler.start(options).dashboard' && o.name === 'clientBufferBytes'), 'nested option objects were followed');
  assert.deepEqual(offences, []);
});
