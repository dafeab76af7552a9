/** Both built-in workloads on real processes, with more data than the cluster's memory, verified exactly. */
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { test } from 'node:test';
import type { LocalCluster } from '../../src/client/local-cluster.js';
import { runLocal } from '../../src/cli/local.js';
import { tempDir } from '../helpers/temp-dir.js';
import { alive } from '../helpers/proc.js';
import { MiB } from './helpers.js';

const LIMIT = 64 * MiB;
// 1.25× the memory of 2 workers: every worker holds more than its limit, so spills.
const DATA = 160 * MiB;

test('task-based shuffle: every worker serves spilled pieces to the other; the result verifies', async (t) => {
  const dir = await tempDir(t, 'spillway-e2e-');
  let cluster: LocalCluster | undefined;
  const s = await runLocal({
    workers: 2,
    memoryLimit: LIMIT,
    workload: 'shuffle',
    method: 'tasks',
    size: DATA,
    // P² pieces: 24 partitions of 6.7 MiB make 576 pieces of 280 KiB, enough to spread
    // over both workers' disks; the default's P (50) quadruples the tasks.
    partitions: 24,
    nthreads: 1,
    localDirectory: dir,
    onStarted: (c) => (cluster = c),
  });
  assert.deepEqual(s.problems, []);
  assert.equal(s.completed && s.verified, true);
  assert.equal(s.dataBytes > 2 * LIMIT, true, 'more data than the cluster holds');
  for (const w of s.workers) {
    assert.ok(w.spilledBytes > 0, `${w.name} spilled`);
    assert.ok(w.servedFromDiskBytes > 0, `${w.name} served spilled data to its peer`);
  }
  assert.ok(cluster !== undefined);
  for (const pid of [cluster.schedulerPid, ...cluster.workers]) assert.equal(alive(pid), false);
  assert.deepEqual(await readdir(dir), [], 'no spill folder left');
});

test('map-reduce: the mean and the sum of squared deviations are exact', async (t) => {
  const dir = await tempDir(t, 'spillway-e2e-');
  const s = await runLocal({ workers: 2, memoryLimit: LIMIT, workload: 'map-reduce', size: DATA, nthreads: 1, localDirectory: dir });
  assert.deepEqual(s.problems, []);
  assert.equal(s.completed && s.verified, true);
  assert.ok(s.workers.some((w) => w.spilledBytes > 0), 'the data did not fit: it was spilled');
  assert.deepEqual(await readdir(dir), []);
});

test('p2p shuffle: pieces pushed to the owners of their outputs and spilled there; the result verifies', async (t) => {
  const dir = await tempDir(t, 'spillway-e2e-');
  const s = await runLocal({ workers: 2, memoryLimit: LIMIT, workload: 'shuffle', method: 'p2p', size: DATA, nthreads: 1, localDirectory: dir });
  assert.deepEqual(s.problems, []);
  assert.equal(s.completed && s.verified, true);
  assert.equal(s.tasks.total, 4 * s.partitions + 1, 'inputs, transfers, the barrier, outputs and checks: O(P) tasks');
  for (const w of s.workers) assert.ok(w.spilledBytes > 0, `${w.name} spilled`);
  assert.deepEqual(await readdir(dir), [], 'no spill folder left');
});

test('p2p shuffle survives a worker SIGKILLed in the middle: the shuffle restarts and the result verifies', async (t) => {
  const dir = await tempDir(t, 'spillway-e2e-');
  let cluster: LocalCluster | undefined;
  let killedAt: number | undefined;
  const s = await runLocal({
    workers: 2,
    memoryLimit: LIMIT,
    workload: 'shuffle',
    size: DATA,
    nthreads: 1,
    localDirectory: dir,
    onStarted: (c) => (cluster = c),
    onSample: (sample) => {
      // Once a third of the tasks are done: pieces and outputs exist on both workers.
      if (killedAt === undefined && cluster !== undefined && sample.tasks.total > 0 && sample.tasks.done > sample.tasks.total / 3) {
        killedAt = sample.tasks.done;
        void cluster.killWorker(1, 'SIGKILL');
      }
    },
  });
  assert.ok(killedAt !== undefined, 'the worker was killed during the run');
  assert.deepEqual(s.problems, []);
  assert.equal(s.completed && s.verified, true);
  // The supervisor started it again (LocalCluster restarts workers).
  assert.equal(s.workers[1].restarts, 1);
  assert.deepEqual(await readdir(dir), []);
});
