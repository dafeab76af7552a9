/**
 * Where the suite's own modules are, whichever way it runs: compiled into build/ by
 * test/run.ts (`npm test`, CI), or from the TypeScript through tsx (one file at a time while
 * working: `node --import tsx --test test/x/y.test.ts`). A test that names a module of the
 * suite (a task fixture, a script a child runs, the CLI from source) names it through these,
 * so both ways run the same code.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const compiled = !import.meta.url.endsWith('.ts');

/** The extension of the suite's modules as they run: `.js` compiled, `.ts` through tsx. */
export const ext = compiled ? '.js' : '.ts';

/** The checkout's root (the folder holding package.json, docs/, dist/ and src/). */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), compiled ? '../../..' : '../..');

/** Node options a child needs to run the suite's modules: tsx for the TypeScript, none compiled. */
export const nodeImports: readonly string[] = compiled ? [] : ['--import', 'tsx'];

/**
 * A module of the suite or of src/ by its path from the checkout's root, without an
 * extension (`'src/cli/main'`, `'test/net/fixtures/client'`), as a path to run.
 */
export function suiteModule(fromRoot: string): string {
  return path.join(repoRoot, compiled ? 'build' : '', `${fromRoot}${ext}`);
}
