import assert from 'node:assert/strict';
import { access } from 'node:fs/promises';
import type { TestContext } from 'node:test';
import { LocalCluster, type LocalClusterOptions } from '../../src/client/local-cluster.js';
import { SpillStore } from '../../src/store/spill-store.js';
import { DataServer } from '../../src/transfer/server.js';
import { alive } from '../helpers/proc.js';
import { ext } from '../helpers/suite.js';

export const MiB = 1024 * 1024;

/** A task function of the fixtures module. */
export const fixture = (name: string): { module: string; name: string } => ({ module: new URL(`./fixtures/tasks${ext}`, import.meta.url).href, name });

export async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/** Log lines at warn or above (pino's JSON levels 40-60) in a process's kept stderr. */
export function warningLines(stderrTail: string): string[] {
  return stderrTail.split('\n').filter((line) => /^\{"level":(4|5|6)0,/.test(line));
}

/**
 * Starts a cluster for one test; at the end reports what its processes logged at warn or
 * above (as test diagnostics: a worker removed for missed heartbeats on a loaded machine is
 * then named in the run's output) and checks that it leaves no process and no folder behind.
 */
export async function startCluster(t: TestContext, options: LocalClusterOptions = {}): Promise<LocalCluster> {
  // Heartbeats every 500 ms: a worker is removed after 2.5 s of silence. With two test files
  // running beside each other on a 2-core machine, a worker of a few MiB collecting all the
  // time can fall silent for a second; tests about silence ask for faster heartbeats.
  const cluster = await LocalCluster.start({ workers: 2, memoryLimit: '64 MiB', heartbeatIntervalMs: 500, ...options });
  t.after(async () => {
    const tails = [['scheduler', cluster.schedulerStderrTail], ...cluster.supervisor.workers.map((w, i) => [`worker ${i}`, w.stderrTail])];
    for (const [label, tail] of tails) for (const line of warningLines(tail).slice(-10)) t.diagnostic(`${label}: ${line}`);
    await cluster.close();
    for (const pid of [cluster.schedulerPid, ...cluster.workers]) assert.equal(alive(pid), false, `process ${pid} is still running`);
    assert.equal(await exists(cluster.directory), false, 'the scratch folder was removed');
  });
  return cluster;
}

/** A data server holding x = 42, as a worker would (no scheduler: the tests play it). */
export async function holderOfX(t: TestContext): Promise<DataServer> {
  const data = await SpillStore.open({ memoryLimit: '64 MiB', monitorIntervalMs: false });
  t.after(() => data.close());
  data.set('x', 42);
  const dataServer = await DataServer.listen(data, { host: '127.0.0.1' });
  t.after(() => dataServer.close());
  return dataServer;
}
