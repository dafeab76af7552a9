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
import { assertBuilt, packageJson, root, runScript, specifiers } from './built.js';

/** The README's entry-point table: specifier -> the names it lists. */
function documentedExports(): Map<string, string[]> {
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
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
    const modules = [await import(${JSON.stringify(`${root}/dist/errors.js`)}), await import(${JSON.stringify(`${root}/dist/transfer/errors.js`)})];
    const { SpillwayError } = modules[0];
    const names = modules.flatMap((m) => Object.entries(m).filter(([, v]) => typeof v === 'function' && v.prototype instanceof SpillwayError).map(([k]) => k));
    process.stdout.write(JSON.stringify(names));
  `);
  assert.ok(errorClasses.length > 10, 'error classes were found');
  assert.deepEqual(errorClasses.filter((name) => !exported.spillway.includes(name)), [], "every error class of src/errors.ts and src/transfer/errors.ts is exported from 'spillway'");
  for (const { types, default: js } of Object.values(packageJson.exports)) {
    assert.ok(fs.existsSync(path.join(root, types)), `${types} is built`);
    assert.ok(fs.existsSync(path.join(root, js)), `${js} is built`);
  }
});

/** Every declaration file reachable from the entry points' types. */
function publicDeclarations(): string[] {
  const seen = new Set<string>();
  const pending = Object.values(packageJson.exports).map((entry) => path.join(root, entry.types));
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
      if (/\bconst enum\b/.test(line) || /\bany\b/.test(line)) offences.push(`${path.relative(root, file)}: ${line.trim()}`);
    }
  }
  assert.deepEqual(offences, []);
});

/** The names of every interface, type and class the entry points export (following `export *`). */
function publicNames(): Set<string> {
  const names = new Set<string>();
  const seen = new Set<string>();
  const visit = (file: string, all: boolean): void => {
    if (seen.has(`${file}:${all}`)) return;
    seen.add(`${file}:${all}`);
    const text = fs.readFileSync(file, 'utf8');
    const resolve = (spec: string): string => path.resolve(path.dirname(file), spec.replace(/\.js$/, '.d.ts'));
    if (all) for (const m of text.matchAll(/export (?:declare )?(?:interface|type|class|abstract class) (\w+)/g)) names.add(m[1]);
    for (const m of text.matchAll(/export (?:type )?\{([^}]*)\} from '([^']+)'/g)) {
      for (const item of m[1].split(',')) {
        const name = item.trim().replace(/^type /, '').split(' as ')[0].trim();
        if (name !== '') names.add(name);
      }
    }
    for (const m of text.matchAll(/export \* (?:as \w+ )?from '([^']+)'/g)) visit(resolve(m[1]), true);
  };
  for (const entry of Object.values(packageJson.exports)) visit(path.join(root, entry.types), false);
  return names;
}

test('public options name their units: byte sizes take strings, durations end in Ms', () => {
  assertBuilt();
  const texts = publicDeclarations().map((file) => fs.readFileSync(file, 'utf8'));
  const exported = publicNames();
  const aliases = new Map<string, string>();
  for (const text of texts) for (const m of text.matchAll(/type (\w+) = ([^;]+);/g)) aliases.set(m[1], m[2]);
  const offences: string[] = [];
  let checked = 0;
  for (const text of texts) {
    for (const m of text.matchAll(/export interface (\w+(?:Options|Limits))\b[^{]*\{([\s\S]*?)\n\}/g)) {
      if (!exported.has(m[1])) continue;
      for (const line of m[2].split('\n')) {
        const property = /^\s+(?:readonly )?(\w+)\??: (.*);$/.exec(line);
        if (property === null) continue;
        const [, name, type] = property;
        checked++;
        const acceptsString = /\bstring\b/.test(type) || /\bstring\b/.test(aliases.get(type) ?? '');
        if (/(Bytes|^capacity|^memoryLimit|^maxSpill|^size)$/.test(name) && !acceptsString) offences.push(`${m[1]}.${name}: ${type} (a byte size takes '64 MiB' too)`);
        if (/(Interval|Delay|Timeout|Backoff|After)$/.test(name)) offences.push(`${m[1]}.${name}: a duration names its unit (…Ms)`);
      }
    }
  }
  assert.ok(checked > 50, `options were found (${checked} properties)`);
  assert.deepEqual(offences, []);
});
