import { performance } from 'node:perf_hooks';
import { Client } from '../client/client.js';
import { LocalCluster } from '../client/local-cluster.js';
import { ClusterMonitor, type ClusterSample, type WorkerRunStats } from '../client/monitor.js';
import { errorMessage } from '../errors.js';
import type { LogLevel } from '../log.js';
import { type ShuffleMethod, defaultPartitions, planWorkload, type WorkloadName } from '../workloads/index.js';

export interface LocalOptions {
  workers: number;
  /** Per worker, bytes. */
  memoryLimit: number;
  workload: WorkloadName;
  /** Bytes of data to generate. Default: 3 × the cluster's memory. */
  size?: number;
  partitions?: number;
  /** How the shuffle exchanges data: `p2p` (default) or `tasks`. */
  method?: ShuffleMethod;
  nthreads?: number;
  localDirectory?: string;
  /** Port of the scheduler's HTTP server (dashboard, metrics). Default: a free one. */
  httpPort?: number;
  seed?: number;
  /** Mutual TLS between every member, with a throwaway CA. */
  tls?: boolean;
  /** The cluster processes' log level (their stderr, shown when one fails). */
  logLevel?: LogLevel;
  /** Called about 5 times a second with the cluster's progress. */
  onSample?: (sample: ClusterSample) => void;
  /** Called once the cluster is up, e.g. to kill a worker in a test. */
  onStarted?: (cluster: LocalCluster) => void;
}

export interface LocalSummary {
  workload: WorkloadName;
  /** The shuffle's method (undefined for other workloads). */
  method: ShuffleMethod | undefined;
  completed: boolean;
  verified: boolean;
  /** Why it did not complete or verify. */
  problems: string[];
  /** From submitting the graph to having verified its result; startup excluded. */
  wallSeconds: number;
  computeSeconds: number;
  verifySeconds: number;
  startupSeconds: number;
  dataBytes: number;
  partitions: number;
  tasks: { done: number; total: number; erred: number };
  clusterMemoryLimit: number;
  workers: WorkerRunStats[];
  /** A query's answer (the TPC-H workloads), as rows. */
  rows?: object[];
}

const HEARTBEAT_MS = 500;

/** Starts a LocalCluster, runs a built-in workload on it, verifies it, and stops everything. */
export async function runLocal(options: LocalOptions): Promise<LocalSummary> {
  const clusterMemory = options.workers * options.memoryLimit;
  const size = options.size ?? 3 * clusterMemory;
  const partitions = options.partitions ?? defaultPartitions(size, options.memoryLimit, options.workers);
  const plan = planWorkload(options.workload, { bytes: size, partitions, seed: options.seed, method: options.method });
  const startedAt = performance.now();
  const cluster = await LocalCluster.start({
    workers: options.workers,
    memoryLimit: options.memoryLimit,
    nthreads: options.nthreads,
    localDirectory: options.localDirectory,
    httpPort: options.httpPort,
    heartbeatIntervalMs: HEARTBEAT_MS,
    tls: options.tls === true,
    logLevel: options.logLevel,
  });
  const startupSeconds = (performance.now() - startedAt) / 1000;
  const monitor = new ClusterMonitor(cluster);
  const problems: string[] = [];
  let completed = false;
  let verified = false;
  let computeSeconds = 0;
  let verifySeconds = 0;
  let client: Client | undefined;
  let rows: object[] | undefined;
  try {
    // The client's spill folder goes in the cluster's scratch folder, which a signal handler
    // (killLocalClusters) removes: one under localDirectory would outlive a Ctrl-C.
    client = await Client.connect(cluster.address, { token: cluster.token, tls: cluster.tls, localDirectory: cluster.directory });
    // With every worker gone for good (not restarted) nothing can finish: fail instead of waiting forever.
    let abort!: (err: Error) => void;
    const aborted = new Promise<never>((_, reject) => (abort = reject));
    aborted.catch(() => undefined);
    void cluster.supervisor.done.then(() => abort(new Error('every worker process exited')));
    monitor.start(200, (sample) => options.onSample?.(sample));
    options.onStarted?.(cluster);
    const t0 = performance.now();
    const results = await Promise.race([client.compute(plan.graph, plan.wanted), aborted]);
    computeSeconds = (performance.now() - t0) / 1000;
    completed = true;
    const t1 = performance.now();
    rows = plan.rows?.(results);
    const check = await plan.verify(results);
    verifySeconds = (performance.now() - t1) / 1000;
    verified = check.verified;
    problems.push(...check.problems);
  } catch (err) {
    problems.push(errorMessage(err));
  } finally {
    // One more heartbeat, so the cumulative counters include the end of the run.
    await new Promise((resolve) => setTimeout(resolve, HEARTBEAT_MS + 200));
    await client?.close().catch(() => undefined);
  }
  const sample = await monitor.stop();
  await cluster.close();
  return {
    workload: options.workload,
    method: options.workload === 'shuffle' ? (options.method ?? 'p2p') : undefined,
    completed,
    verified,
    problems,
    wallSeconds: computeSeconds + verifySeconds,
    computeSeconds,
    verifySeconds,
    startupSeconds,
    dataBytes: plan.dataBytes,
    partitions,
    tasks: { ...sample.tasks, total: Object.keys(plan.graph).length, done: completed ? Object.keys(plan.graph).length : sample.tasks.done },
    clusterMemoryLimit: clusterMemory,
    workers: sample.workers,
    ...(rows === undefined ? {} : { rows }),
  };
}
