/**
 * `npm run bench -- <name> [args...]` runs benchmarks/<name>.ts, whose default export is
 * `(args: string[]) => Promise<void>`. Each benchmark prints its own ratios against a
 * reference measured in the same run (this machine is shared and noisy).
 */
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const available = (await readdir(here))
  .filter((f) => f.endsWith('.ts') && f !== 'run.ts' && !f.startsWith('_'))
  .map((f) => f.slice(0, -3));

const [name, ...args] = process.argv.slice(2);
if (name === undefined || !available.includes(name)) {
  console.error(`usage: npm run bench -- <${available.join('|')}> [args...]`);
  process.exit(name === undefined ? 0 : 2);
}
const mod = (await import(pathToFileURL(path.join(here, `${name}.ts`)).href)) as {
  default: (args: string[]) => Promise<void>;
};
await mod.default(args);
