/**
 * docs/graphs.md, runnable: word lengths counted on a local cluster.
 *   node --import tsx examples/graph-example.ts
 * Task functions live in this very module: workers import it by its URL.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Client, LocalCluster, ref, type Graph } from '../src/index.js';

/** A task: makes one partition of data on the worker (nothing is shipped from here). */
export function makeNumbers(seed: number, count: number): Float64Array {
  const out = new Float64Array(count);
  let x = seed;
  for (let i = 0; i < count; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    out[i] = x % 1000;
  }
  return out;
}

/** A task: a small summary of one partition. */
export function summarize(values: Float64Array): { count: number; sum: number } {
  let sum = 0;
  for (const v of values) sum += v;
  return { count: values.length, sum };
}

/** A task: combines summaries (its argument is an array of references). */
export function combine(parts: Array<{ count: number; sum: number }>): { count: number; sum: number; mean: number } {
  const count = parts.reduce((n, p) => n + p.count, 0);
  const sum = parts.reduce((n, p) => n + p.sum, 0);
  return { count, sum, mean: sum / count };
}

const fn = (name: string): { module: string; name: string } => ({ module: import.meta.url, name });

async function main(): Promise<void> {
  const graph: Graph = {};
  for (let i = 0; i < 8; i++) {
    graph[`numbers-${i}`] = { fn: fn('makeNumbers'), args: [i + 1, 1_000_000] };
    graph[`summary-${i}`] = { fn: fn('summarize'), args: [ref(`numbers-${i}`)] };
  }
  graph.total = { fn: fn('combine'), args: [Array.from({ length: 8 }, (_, i) => ref(`summary-${i}`))] };

  const cluster = await LocalCluster.start({ workers: 2, memoryLimit: '128 MiB' });
  const client = await Client.connect(cluster.address, { token: cluster.token });
  try {
    const [total] = await client.compute<{ count: number; sum: number; mean: number }>(graph, ['total'], {
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
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
