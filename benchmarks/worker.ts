/**
 * Worker benchmark (issue 5). `npm run bench -- worker [--reps 200] [--mib 8]`
 *
 * 1. Per-task overhead of the executor (piscina threads) and of a whole Worker
 *    (compute-task → thread → store.set → task-finished over a real control channel).
 * 2. Passing a `--mib` Float64Array input to a thread: copied once and moved (what the
 *    executor does), copied by structured clone (posted as it is), shared
 *    (SharedArrayBuffer-backed), or copied into a fresh SharedArrayBuffer per task. Reports the wall time per task and the main thread's
 *    share (what the event loop pays), with an empty task as the reference.
 * 3. A result of the same size coming back (moved by the transfer list).
 * This module is also the task module the threads import (only definitions at top level).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { type ComputeTaskParams, Methods, type RegisterWorkerResult, type TaskFinishedParams } from '../src/cluster/protocol.js';
import type { Channel } from '../src/control/channel.js';
import { ControlServer } from '../src/control/server.js';
import { Executor } from '../src/worker/executor.js';
import { Worker } from '../src/worker/index.js';
import { loadAverage } from './_cluster-common.js';

// ---------------------------------------------------------------- task functions (run in threads)

export function noop(): number {
  return 0;
}

export function first(array: Float64Array): number {
  return array[0];
}

export function make(length: number): Float64Array {
  return new Float64Array(length).fill(1);
}

// ---------------------------------------------------------------- measurement

const MiB = 1024 * 1024;
const FN = (name: string): { module: string; name: string } => ({ module: import.meta.url, name });

function option(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

interface Figures {
  wallUs: number;
  /** Time inside the function itself (reported by the thread). */
  computeUs: number;
  mainUs: number;
  maxLoopDelayMs: number;
}

/** Sequential tasks; `mainUs` is the synchronous time of submitting one (serialization happens there). */
async function measure(executor: Executor, reps: number, fnName: string, makeArgs: () => unknown[]): Promise<Figures> {
  for (let i = 0; i < 10; i++) await executor.run(FN(fnName), makeArgs());
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  let main = 0;
  let compute = 0;
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) {
    const m0 = performance.now();
    const args = makeArgs();
    const done = executor.run(FN(fnName), args);
    main += performance.now() - m0;
    const result = await done;
    if (!result.ok) throw new Error(`${fnName} failed: ${result.error.message}`);
    compute += result.computeSeconds;
  }
  const wall = performance.now() - t0;
  histogram.disable();
  return { wallUs: (wall / reps) * 1000, computeUs: (compute / reps) * 1e6, mainUs: (main / reps) * 1000, maxLoopDelayMs: histogram.max / 1e6 };
}

/** compute-task → task-finished round trips through a real Worker, one at a time. */
async function workerRoundTrip(reps: number): Promise<number> {
  const server = await ControlServer.listen();
  let channel: Channel | undefined;
  const finished: ((params: TaskFinishedParams) => void)[] = [];
  server.on('channel', (c: Channel) => {
    channel = c;
    c.handle(Methods.registerWorker, (): RegisterWorkerResult => ({ workerId: 'bench', heartbeatIntervalMs: 1000 }));
    c.handle(Methods.heartbeat, () => undefined);
    c.handle(Methods.taskFinished, (params) => finished.shift()?.(params as TaskFinishedParams));
  });
  // A limit far above this process's own RSS (tsx, the buffers measured before): a worker
  // over its pause level makes each task wait for room, which is not the path measured here.
  const worker = await Worker.start({ scheduler: server.address, memoryLimit: '2 GiB', nthreads: 1, monitorIntervalMs: false });
  try {
    const run = (key: string): Promise<TaskFinishedParams> =>
      new Promise((resolve) => {
        finished.push(resolve);
        const params: ComputeTaskParams = { key, spec: { fn: FN('noop'), args: [] }, deps: {}, priority: 0 };
        channel?.notify(Methods.computeTask, params);
      });
    for (let i = 0; i < 10; i++) await run(`warm-${i}`);
    const t0 = performance.now();
    for (let i = 0; i < reps; i++) await run(`t-${i}`);
    return ((performance.now() - t0) / reps) * 1000;
  } finally {
    await worker.close();
    await server.close();
  }
}

function row(name: string, f: Figures, reference?: Figures): string {
  const extra = reference === undefined ? '' : `  (+${(f.wallUs - reference.wallUs).toFixed(0)} µs wall, +${(f.mainUs - reference.mainUs).toFixed(0)} µs main)`;
  return `${name.padEnd(44)} ${f.wallUs.toFixed(0).padStart(7)} µs/task (fn ${f.computeUs.toFixed(0).padStart(5)})  main thread ${f.mainUs.toFixed(0).padStart(6)} µs  max loop delay ${f.maxLoopDelayMs.toFixed(1)} ms${extra}`;
}

export default async function main(args: string[]): Promise<void> {
  const reps = option(args, '--reps', 200);
  const mib = option(args, '--mib', 8);
  const length = (mib * MiB) / 8;
  const loadAtStart = loadAverage();
  const executor = new Executor(1);
  try {
    const empty = await measure(executor, reps, 'noop', () => []);
    const plain = new Float64Array(length).fill(1);
    const shared = new Float64Array(new SharedArrayBuffer(length * 8)).fill(1);
    const moved = await measure(executor, reps, 'first', () => [plain]);
    const cloning = new Executor(1, { moveInputs: false });
    const cloned = await measure(cloning, reps, 'first', () => [plain]).finally(() => cloning.close());
    const sharedFig = await measure(executor, reps, 'first', () => [shared]);
    const copyToShared = await measure(executor, reps, 'first', () => {
      const copy = new Float64Array(new SharedArrayBuffer(length * 8));
      copy.set(plain);
      return [copy];
    });
    const output = await measure(executor, Math.min(reps, 100), 'make', () => [length]);
    const roundTrip = await workerRoundTrip(reps);
    console.log(`worker benchmark: ${reps} sequential tasks each, ${mib} MiB Float64Array, 1 thread, node ${process.version}, load average ${loadAtStart} at the start, ${loadAverage()} at the end`);
    console.log(row('empty task (executor overhead)', empty));
    console.log(row(`input ${mib} MiB ArrayBuffer: copied, moved`, moved, empty));
    console.log(row(`input ${mib} MiB ArrayBuffer: structured clone`, cloned, empty));
    console.log(row(`input ${mib} MiB SharedArrayBuffer: shared`, sharedFig, empty));
    console.log(row(`input ${mib} MiB copied into a new SAB per task`, copyToShared, empty));
    console.log(row(`output ${mib} MiB made in the thread, moved`, output, empty));
    console.log(`${'whole worker: compute-task → task-finished'.padEnd(44)} ${roundTrip.toFixed(0).padStart(7)} µs/task`);
  } finally {
    await executor.close();
  }
}
