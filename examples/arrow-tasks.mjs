/**
 * An Arrow-in-tasks job, runnable with plain Node after `npm run build`:
 *   node examples/arrow-tasks.mjs
 * Each task makes or reads Apache Arrow tables; Spillway stores, spills and moves them
 * between workers as Arrow IPC, and every task gets real `arrow.Table`s. A class of our own
 * (`Histogram`) travels the same way once registered. Task functions live in this very
 * module: workers import it by its URL, which also registers the type there.
 */
import { pathToFileURL } from 'node:url';
import * as arrow from 'apache-arrow';
import { Client, LocalCluster, ref, registerType, shuffle } from 'spillway';

const REGIONS = ['north', 'south', 'east', 'west'];

/** Our own type: counts of amounts in buckets of 100. */
export class Histogram {
  constructor(counts) {
    this.counts = counts; // Float64Array
  }
  add(other) {
    const counts = new Float64Array(Math.max(this.counts.length, other.counts.length));
    counts.set(this.counts);
    other.counts.forEach((c, i) => (counts[i] += c));
    return new Histogram(counts);
  }
}

registerType(Histogram, {
  name: 'example.Histogram',
  encode: (h) => ({ buffers: [h.counts] }),
  decode: ({ buffers: [bytes] }) => new Histogram(new Float64Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 8)),
});

/** Task: one partition of sales, as an Arrow table (region as a dictionary column). */
export function makeSales(seed, rows) {
  const region = new Int32Array(rows);
  const amount = new Float64Array(rows);
  const day = new Int32Array(rows);
  let x = seed;
  for (let i = 0; i < rows; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    region[i] = Math.floor(x / 65_536) % REGIONS.length; // high bits: the low ones of this generator repeat quickly
    amount[i] = (Math.floor(x / 256) % 100_000) / 100; // 0.00 to 999.99
    day[i] = Math.floor(x / 4096) % 365;
  }
  return salesTable(region, amount, day);
}

function salesTable(region, amount, day) {
  const dictionary = arrow.vectorFromArray(REGIONS, new arrow.Utf8());
  const type = new arrow.Dictionary(new arrow.Utf8(), new arrow.Int32());
  return new arrow.Table({
    region: arrow.makeVector(arrow.makeData({ type, length: region.length, data: region, dictionary })),
    amount: arrow.makeVector(amount),
    day: arrow.makeVector(day),
  });
}

/** Shuffle split: the rows of each region into piece `region % parts` (typed arrays, batch by batch). */
export function splitByRegion(table, parts) {
  const pieces = Array.from({ length: parts }, () => ({ region: [], amount: [], day: [] }));
  for (const batch of table.batches) {
    const region = batch.getChild('region').data[0].values; // the dictionary's indices: REGIONS' order
    const amount = batch.getChild('amount').data[0].values;
    const day = batch.getChild('day').data[0].values;
    for (let i = 0; i < batch.numRows; i++) {
      const piece = pieces[region[i] % parts];
      piece.region.push(region[i]);
      piece.amount.push(amount[i]);
      piece.day.push(day[i]);
    }
  }
  return pieces.map((p) => salesTable(Int32Array.from(p.region), Float64Array.from(p.amount), Int32Array.from(p.day)));
}

/** Shuffle combine: the pieces as one table (batches side by side, no copy). */
export function concatTables(pieces) {
  return pieces.reduce((all, piece) => all.concat(piece));
}

/** Task: totals per region of one output, as an Arrow table, and a histogram of its amounts. */
export function summarize(table) {
  const totals = new Map();
  const counts = new Float64Array(10);
  const regions = table.getChild('region');
  const amounts = table.getChild('amount');
  for (let i = 0; i < table.numRows; i++) {
    const region = regions.get(i);
    const amount = amounts.get(i);
    const total = totals.get(region) ?? { sales: 0, amount: 0 };
    total.sales += 1;
    total.amount += amount;
    totals.set(region, total);
    counts[Math.min(9, Math.floor(amount / 100))] += 1;
  }
  const names = [...totals.keys()].sort();
  const byRegion = arrow.tableFromArrays({
    region: names,
    sales: Int32Array.from(names, (n) => totals.get(n).sales),
    amount: Float64Array.from(names, (n) => Math.round(totals.get(n).amount * 100) / 100),
  });
  return { byRegion, histogram: new Histogram(counts) };
}

/** Task: every output's summary merged into one table and one histogram. */
export function merge(...summaries) {
  return {
    byRegion: summaries.map((s) => s.byRegion).reduce((all, t) => all.concat(t)),
    histogram: summaries.map((s) => s.histogram).reduce((all, h) => all.add(h)),
  };
}

const fn = (name) => ({ module: import.meta.url, name });

async function main() {
  // Two workers; tables beyond their memory limit would spill to disk and come back as needed.
  const cluster = await LocalCluster.start({ workers: 2, memoryLimit: '256 MiB' });
  try {
    const client = await Client.connect(cluster.address, { token: cluster.token });
    try {
      const graph = {};
      const inputs = [];
      for (let i = 0; i < 8; i++) {
        graph[`sales-${i}`] = { fn: fn('makeSales'), args: [i + 1, 100_000] };
        inputs.push(`sales-${i}`);
      }
      const nodes = shuffle({ id: 'by-region', inputs, partitions: 4, split: fn('splitByRegion'), combine: fn('concatTables') });
      Object.assign(graph, nodes.graph);
      nodes.outputs.forEach((key, j) => (graph[`summary-${j}`] = { fn: fn('summarize'), args: [ref(key)] }));
      graph.result = { fn: fn('merge'), args: nodes.outputs.map((_, j) => ref(`summary-${j}`)) };
      const [result] = await client.compute(graph, ['result']);
      const rows = result.byRegion.toArray().map((row) => row.toJSON());
      console.log('sales by region:', rows);
      console.log('amounts by hundreds:', Array.from(result.histogram.counts));
      console.log('is an Arrow table:', result.byRegion instanceof arrow.Table, '| is a Histogram:', result.histogram instanceof Histogram);
    } finally {
      await client.close();
    }
  } finally {
    await cluster.close();
  }
}

// Run as a script (workers import this module for its tasks, and must not run the job).
// Not awaited at the top level: the client imports this module to check its tasks, which
// would wait for this module's own evaluation to finish.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
