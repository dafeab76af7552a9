// @ts-check
/**
 * A graph dict (docs/graphs.md#graph-dicts), runnable after `npm run build`:
 *   node examples/graph-dict.mjs
 * Task functions live in this very module: workers import it by its URL.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Client, LocalCluster, ref } from 'spillway';

/**
 * A task: makes one partition of data on the worker (nothing is shipped from here).
 * @param {number} seed
 * @param {number} count
 */
export function makeNumbers(seed, count) {
  const out = new Float64Array(count);
  let x = seed;
  for (let i = 0; i < count; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    out[i] = x % 1000;
  }
  return out;
}

/**
 * A task: a small summary of one partition.
 * @param {Float64Array} values
 */
export function summarize(values) {
  let sum = 0;
  for (const v of values) sum += v;
  return { count: values.length, sum };
}

/**
 * A task: combines summaries (its argument is an array of references).
 * @param {Array<{ count: number, sum: number }>} parts
 */
export function combine(parts) {
  const count = parts.reduce((n, p) => n + p.count, 0);
  const sum = parts.reduce((n, p) => n + p.sum, 0);
  return { count, sum, mean: sum / count };
}

/** @param {string} name */
const fn = (name) => ({ module: import.meta.url, name });

async function main() {
  /** @type {import('spillway').Graph} */
  const graph = {};
  for (let i = 0; i < 8; i++) {
    graph[`numbers-${i}`] = { fn: fn('makeNumbers'), args: [i + 1, 1_000_000] };
    graph[`summary-${i}`] = { fn: fn('summarize'), args: [ref(`numbers-${i}`)] };
  }
  graph.total = { fn: fn('combine'), args: [Array.from({ length: 8 }, (_, i) => ref(`summary-${i}`))] };

  const cluster = await LocalCluster.start({ workers: 2, memoryLimit: '256 MiB' });
  const client = await Client.connect(cluster.address, { token: cluster.token });
  try {
    const [total] = await client.compute(graph, ['total'], {
      onProgress: (p) => process.stderr.write(`${p.ready}/${p.wanted} results\n`),
    });
    console.log(total);
  } finally {
    await client.close();
    await cluster.close();
  }
}

// Workers import this module too: only the main program runs the example.
// Not a top-level await: the client imports this module to check the functions, and an
// import of a module still evaluating would wait for main() itself.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
