/**
 * Every entry point of the built package loads both ways: `import`, and `require` on a Node
 * with require(esm) (20.19+, 22.12+), which refuses a module graph with top-level await.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertBuilt, runScript, specifiers } from './built.js';

test('require() and import of every entry point give the same exports (no top-level await)', async (t) => {
  if (process.features.require_module !== true) {
    t.skip(`Node ${process.version} cannot require() an ES module (it needs 20.19+ or 22.12+)`);
    return;
  }
  assertBuilt();
  const script = `
    import { createRequire } from 'node:module';
    const require = createRequire(process.cwd() + '/');
    const out = {};
    for (const name of ${JSON.stringify(specifiers)}) {
      let required;
      try {
        required = Object.keys(require(name)).sort();
      } catch (err) {
        required = String(err.code ?? err.message);
      }
      out[name] = { required, imported: Object.keys(await import(name)).sort() };
    }
    process.stdout.write(JSON.stringify(out));
  `;
  const out = await runScript<Record<string, { required: string[] | string; imported: string[] }>>(script);
  for (const name of specifiers) {
    const { required, imported } = out[name];
    assert.ok(Array.isArray(required), `require('${name}') failed: ${String(required)}`);
    assert.ok(imported.length > 0, `${name} exports something`);
    assert.deepEqual(required.filter((k) => k !== 'module.exports'), imported, `${name}: require and import agree`);
  }
});
