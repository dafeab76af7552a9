// @ts-check
/**
 * Typed tasks and futures (docs/graphs.md), runnable after `npm run build`:
 *   node examples/typed-tasks.mjs
 * The task functions live in this very module: workers import it by its URL. In TypeScript
 * the same code (without the JSDoc types) gets every argument checked by the compiler.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Client, LocalCluster, defineTasks } from 'spillway';

/**
 * A task: makes one partition of data on the worker (nothing is shipped from here).
 * @param {number} seed
 * @param {number} count
 * @returns {Float64Array}
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
 * @returns {{ count: number, sum: number }}
 */
export function summarize(values) {
  let sum = 0;
  for (const v of values) sum += v;
  return { count: values.length, sum };
}

/**
 * A task: combines summaries (given futures or lazy tasks of them).
 * @param {Array<{ count: number, sum: number }>} parts
 */
export function combine(parts) {
  const count = parts.reduce((n, p) => n + p.count, 0);
  const sum = parts.reduce((n, p) => n + p.sum, 0);
  return { count, sum, mean: sum / count };
}

// Each property is named after the function's export.
export const tasks = defineTasks(import.meta.url, { makeNumbers, summarize, combine });

async function main() {
  const cluster = await LocalCluster.start({ workers: 2, memoryLimit: '256 MiB' });
  const client = await Client.connect(cluster.address, { token: cluster.token });
  try {
    // Futures: the work starts now and the results stay on the cluster.
    const seeds = [1, 2, 3, 4, 5, 6, 7, 8];
    const numbers = client.map(tasks.makeNumbers.with({ memory: '16 MiB' }), seeds, 1_000_000);
    const summaries = client.map(tasks.summarize, numbers);
    const total = client.submit(tasks.combine, summaries);
    console.log('futures:', await total.result());

    // Lazy tasks: built here, run by compute; the persisted partitions are not made again.
    const evens = tasks.combine(numbers.filter((_, i) => i % 2 === 0).map((part) => tasks.summarize(part)));
    console.log('lazy:', await client.compute(evens));

    // Release what is no longer needed: the workers free it (`using` does it in TypeScript).
    await Promise.all([...numbers, ...summaries, total].map((future) => future.release()));
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
