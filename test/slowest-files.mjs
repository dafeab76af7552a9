/**
 * A `node --test` reporter that prints one line when the run ends: the slowest test files
 * by wall time (from their process start to its exit), so CI output shows where the
 * suite's time goes. It runs beside the usual reporter. Plain JavaScript, loaded from
 * test/ as it is: the runner's own process loads it, and nothing compiles it.
 */
import path from 'node:path';

const SHOWN = 12;

/** @param {AsyncIterable<import('node:test/reporters').TestEvent>} source */
export default async function* slowestFiles(source) {
  /** @type {Map<string, number>} */
  const seconds = new Map();
  for await (const event of source) {
    if (event.type !== 'test:complete') continue;
    const { file, name, nesting, details } = event.data;
    // A file's own entry is the one named after the file itself (Node 20 names it by its
    // absolute path, later versions relative to the working directory).
    if (nesting !== 0 || file === undefined || path.resolve(name) !== file) continue;
    seconds.set(path.relative(process.cwd(), file), details.duration_ms / 1000);
  }
  if (seconds.size === 0) return;
  const total = [...seconds.values()].reduce((a, b) => a + b, 0);
  const slowest = [...seconds].sort((a, b) => b[1] - a[1]).slice(0, SHOWN);
  yield `# slowest files of ${seconds.size} (${total.toFixed(0)} s in all): ${slowest.map(([file, s]) => `${file} ${s.toFixed(1)} s`).join(', ')}\n`;
}
