/**
 * Spilled inputs corrupted on the worker's disk: the copies are dropped, the inputs recomputed
 * from their tasks, and the job finishes exactly (issue 33, item 6).
 */
import assert from 'node:assert/strict';
import { lstat, open, readdir } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import { ref } from '../../src/cluster/protocol.js';
import { startCluster } from './helpers.js';
import { ext } from '../helpers/suite.js';

const fn = (name: string): { module: string; name: string } => ({ module: new URL(`./fixtures/faults${ext}`, import.meta.url).href, name });
const MiB = 1024 * 1024;

/**
 * Flips bytes in the middle of every spill file under `directory`; returns how many files.
 * Links are not followed: a worker's folder links to the installed packages (for shipped
 * modules), and nothing outside the spill folder may be touched.
 */
async function corruptSpillFiles(directory: string): Promise<number> {
  let count = 0;
  for (const entry of await readdir(directory, { withFileTypes: true })) {
    const file = path.join(directory, entry.name);
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) {
      count += await corruptSpillFiles(file);
      continue;
    }
    if (!entry.isFile()) continue;
    const info = await lstat(file).catch(() => undefined);
    if (info === undefined || !info.isFile() || info.size < 64 * 1024) continue;
    const handle = await open(file, 'r+').catch(() => undefined);
    if (handle === undefined) continue;
    try {
      for (const at of [info.size / 4, info.size / 2, (3 * info.size) / 4].map(Math.floor)) {
        const byte = Buffer.alloc(1);
        await handle.read(byte, 0, 1, at);
        byte[0] ^= 0xff;
        await handle.write(byte, 0, 1, at);
      }
      count++;
    } finally {
      await handle.close();
    }
  }
  return count;
}

test('spilled inputs corrupted on disk are dropped and recomputed; the result is exact', { timeout: 90_000 }, async (t) => {
  const cluster = await startCluster(t, { workers: 1, nthreads: 2, memoryLimit: '16 MiB' });
  const client = await Client.connect(cluster.address, { token: cluster.token });
  t.after(() => client.close());
  const length = MiB / 2; // 4 MiB per input: six of them are more than the worker's memory
  const graph: Record<string, { fn: { module: string; name: string }; args: unknown[] }> = {};
  let expected = 0;
  for (let i = 0; i < 6; i++) {
    graph[`part-${i}`] = { fn: fn('fill'), args: [length, i + 1] };
    expected += length * (i + 1);
  }
  // The gate holds the consumer back while the inputs are spilled and then corrupted.
  graph.gate = { fn: fn('later'), args: [3_000, 0] };
  graph.total = { fn: fn('totalAfter'), args: [ref('gate'), ...Object.keys(graph).filter((k) => k.startsWith('part-')).map((k) => ref(k))] };
  const pending = client.compute(graph, ['total']);
  let corrupted = 0;
  const deadline = Date.now() + 30_000;
  // Corrupt once the inputs are computed and some are on disk (before the gate opens).
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const state = (await cluster.state()) as unknown as { tasks: Record<string, number> };
    if ((state.tasks.memory ?? 0) >= 6) {
      corrupted = await corruptSpillFiles(cluster.directory);
      break;
    }
  }
  assert.ok(corrupted > 0, 'some inputs were spilled and corrupted before the consumer ran');
  const [total] = await pending;
  assert.equal(total, expected);
  const state = (await cluster.state()) as unknown as { counters: { corruptCopies: number; tasksRecomputed: number; tasksErred: number } };
  assert.ok(state.counters.corruptCopies >= 1, `corrupt copies counted: ${state.counters.corruptCopies}`);
  assert.ok(state.counters.tasksRecomputed >= 1, 'the corrupt inputs were recomputed from their tasks');
  assert.equal(state.counters.tasksErred, 0);
});
