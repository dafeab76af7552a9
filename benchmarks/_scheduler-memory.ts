/**
 * The scheduler's memory per task: a Scheduler and a Client in this process (no workers,
 * so nothing runs), the p2p shuffle workload's graph of P partitions submitted, and the
 * process's JS heap after a full collection before and once the scheduler reports every
 * task. The client's part (one future per wanted key) is small beside the scheduler's
 * records; the graph itself was built before the first figure.
 */
import { Client } from '../src/client/client.js';
import { Scheduler } from '../src/scheduler/scheduler.js';
import { planWorkload } from '../src/workloads/index.js';

function collectedHeap(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('run with --expose-gc (npm run bench does)');
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

export interface SchedulerMemory {
  partitions: number;
  tasks: number;
  heapBytes: number;
  submitSeconds: number;
}

export async function schedulerMemory(partitions: number): Promise<SchedulerMemory> {
  const plan = planWorkload('shuffle', { bytes: partitions * 64 * 1024, partitions, method: 'p2p' });
  const tasks = Object.keys(plan.graph).length;
  const scheduler = await Scheduler.start({ host: '127.0.0.1', token: 'bench' });
  const client = await Client.connect(`${scheduler.address.host}:${scheduler.address.port}`, { token: 'bench' });
  try {
    const before = collectedHeap();
    const started = performance.now();
    let seen!: () => void;
    const submitted = new Promise<void>((resolve) => (seen = resolve));
    const computation = client.compute(plan.graph, plan.wanted, {
      progressIntervalMs: 50,
      onProgress: (p) => {
        if (p.tasks !== undefined && p.tasks.total >= tasks) seen();
      },
    });
    computation.catch(() => undefined);
    await submitted;
    const submitSeconds = (performance.now() - started) / 1000;
    const after = collectedHeap();
    return { partitions, tasks, heapBytes: after - before, submitSeconds };
  } finally {
    await client.close().catch(() => undefined);
    await scheduler.close();
  }
}
