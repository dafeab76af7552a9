import { Counter, Gauge, type Registry } from 'prom-client';
import type { WorkerHeartbeat } from '../cluster/protocol.js';
import { MEMORY_PART_TYPES, figure, memoryParts } from './memory-parts.js';

/** One worker as the metrics see it: its stable name, its limit and its latest figures. */
export interface WorkerView {
  name: string;
  memoryLimit: number;
  heartbeat: WorkerHeartbeat | undefined;
}

const PREFIX = 'spillway_worker_';

/**
 * Registers the `spillway_worker_*` families, read from `workers()` at scrape time. The
 * scheduler passes every connected worker (from its last heartbeat), a worker passes
 * itself (its figures now): the same names either way (docs/metrics.md#worker-metrics).
 * The counters are the workers' own cumulative figures: a worker that restarts under the
 * same name starts again from 0, which Prometheus reads as a counter reset.
 */
export function registerWorkerFamilies(registry: Registry, workers: () => Iterable<WorkerView>): void {
  const registers = [registry];
  const each = (fn: (name: string, hb: WorkerHeartbeat, view: WorkerView) => void): void => {
    for (const view of workers()) if (view.heartbeat !== undefined) fn(view.name, view.heartbeat, view);
  };
  new Gauge({
    name: `${PREFIX}memory_bytes`,
    help: 'Resident memory by part; the parts add up to the RSS: managed (values the store holds in memory), pinned (held by running tasks and transfers), detached (dropped by the store, not yet collected), unmanaged (the rest)',
    labelNames: ['worker', 'type'],
    registers,
    collect() {
      this.reset();
      each((worker, hb) => {
        const parts = memoryParts(hb);
        for (const type of MEMORY_PART_TYPES) this.set({ worker, type }, parts[type]);
      });
    },
  });
  new Gauge({
    name: `${PREFIX}rss_bytes`,
    help: 'Resident set size of the worker process',
    labelNames: ['worker'],
    registers,
    collect() {
      this.reset();
      each((worker, hb) => this.set({ worker }, figure(hb.rss)));
    },
  });
  new Gauge({
    name: `${PREFIX}memory_limit_bytes`,
    help: 'Memory limit of the worker',
    labelNames: ['worker'],
    registers,
    collect() {
      this.reset();
      each((worker, _hb, view) => this.set({ worker }, view.memoryLimit));
    },
  });
  new Gauge({
    name: `${PREFIX}spilled_bytes`,
    help: 'Encoded bytes held below memory, per tier',
    labelNames: ['worker', 'tier'],
    registers,
    collect() {
      this.reset();
      each((worker, hb) => {
        for (const tier of hb.tiers ?? []) this.set({ worker, tier: String(tier.name) }, figure(tier.bytes));
      });
    },
  });
  new Gauge({
    name: `${PREFIX}disk_free_bytes`,
    help: 'Bytes free for the worker on the file system of its spill folder',
    labelNames: ['worker'],
    registers,
    collect() {
      this.reset();
      each((worker, hb) => {
        if (typeof hb.diskFreeBytes === 'number') this.set({ worker }, figure(hb.diskFreeBytes));
      });
    },
  });
  new Gauge({
    name: `${PREFIX}event_loop_delay_seconds`,
    help: 'Event-loop delay over the last heartbeat interval: how late the ticks of a 10 ms timer ran: the most (stat="max") and the 99th percentile (stat="p99")',
    labelNames: ['worker', 'stat'],
    registers,
    collect() {
      this.reset();
      each((worker, hb) => {
        this.set({ worker, stat: 'max' }, figure(hb.eventLoopDelayMs) / 1000);
        this.set({ worker, stat: 'p99' }, figure(hb.eventLoopDelayP99Ms) / 1000);
      });
    },
  });
  const counter = (name: string, help: string, labelNames: string[], fill: (set: (labels: Record<string, string>, value: number) => void, hb: WorkerHeartbeat) => void): void => {
    new Counter({
      name: `${PREFIX}${name}`,
      help,
      labelNames: ['worker', ...labelNames],
      registers,
      collect() {
        this.reset();
        each((worker, hb) => fill((labels, value) => this.inc({ worker, ...labels }, figure(value)), hb));
      },
    });
  };
  counter('spill_bytes_total', 'Encoded bytes written to tiers below memory (direction="write") and read back (direction="read")', ['direction'], (set, hb) => {
    set({ direction: 'write' }, hb.spilledBytes);
    set({ direction: 'read' }, hb.unspilledBytes);
  });
  counter('spill_seconds_total', 'Wall time of writes to and reads from tiers below memory (overlapping calls add up)', ['direction'], (set, hb) => {
    set({ direction: 'write' }, hb.spillWriteSeconds ?? 0);
    set({ direction: 'read' }, hb.spillReadSeconds ?? 0);
  });
  counter(
    'transfer_bytes_total',
    'Encoded bytes exchanged with peers: sent from memory or straight from disk, received into memory (decoded) or onto disk (as they came); source="shuffle": pieces a p2p shuffle pushed',
    ['direction', 'source'],
    (set, hb) => {
      set({ direction: 'sent', source: 'memory' }, hb.servedFromMemoryBytes);
      set({ direction: 'sent', source: 'disk' }, hb.servedFromDiskBytes);
      set({ direction: 'received', source: 'memory' }, hb.receivedIntoMemoryBytes ?? 0);
      set({ direction: 'received', source: 'disk' }, hb.receivedIntoDiskBytes ?? 0);
      set({ direction: 'sent', source: 'shuffle' }, hb.shuffleSentBytes ?? 0);
      set({ direction: 'received', source: 'shuffle' }, hb.shuffleReceivedBytes ?? 0);
    },
  );
  counter(
    'restarts_total',
    'Times the supervisor started this worker again (its slot, across processes): reason="memory" after killing it for passing --terminate, reason="exit" after it exited unexpectedly (a crash, kill -9, the kernel\'s OOM killer); absent for a worker without a supervisor',
    ['reason'],
    (set, hb) => {
      for (const [reason, count] of Object.entries(hb.supervisorRestarts ?? {})) set({ reason }, count);
    },
  );
  counter('event_loop_thread_seconds_total', "The event loop's thread since the worker started (Linux): on a core (state=\"run\") and ready but waiting for one (state=\"wait\")", ['state'], (set, hb) => {
    if (typeof hb.loopRunSeconds === 'number') set({ state: 'run' }, hb.loopRunSeconds);
    if (typeof hb.loopWaitSeconds === 'number') set({ state: 'wait' }, hb.loopWaitSeconds);
  });
  counter('spill_errors_total', "The store's errors (failed spill writes and reads, corrupt data...) by error code", ['code'], (set, hb) => {
    const errors = hb.spillErrors;
    if (typeof errors !== 'object' || errors === null) return;
    for (const [code, count] of Object.entries(errors)) set({ code }, count);
  });
}
