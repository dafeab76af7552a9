import { Counter, Gauge, Registry } from 'prom-client';
import type { Counters, Engine } from './engine.js';
import { TASK_STATES } from './state.js';

const PREFIX = 'spillway_scheduler_';

/** Heartbeats are only shape-checked: a missing figure must not break the whole scrape. */
const num = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) ? value : 0);

/**
 * Prometheus metrics of one scheduler, in a Registry of its own (several schedulers may
 * live in one process, as in tests). Values are read from the engine at scrape time.
 * Names and meanings: docs/metrics.md#scheduler-metrics.
 */
export class SchedulerMetrics {
  readonly #registry = new Registry();

  constructor(engine: Engine) {
    const registers = [this.#registry];
    new Gauge({
      name: `${PREFIX}workers`,
      help: 'Workers connected (closing ones included)',
      registers,
      collect() {
        this.set(engine.workers.size);
      },
    });
    new Gauge({
      name: `${PREFIX}clients`,
      help: 'Clients connected',
      registers,
      collect() {
        this.set(engine.clients.size);
      },
    });
    new Gauge({
      name: `${PREFIX}tasks`,
      help: 'Known tasks by state',
      labelNames: ['state'],
      registers,
      collect() {
        for (const state of TASK_STATES) this.set({ state }, engine.tasks.count(state));
      },
    });
    new Gauge({
      name: `${PREFIX}keys_in_memory`,
      help: 'Keys held by at least one worker',
      registers,
      collect() {
        this.set(engine.tasks.count('memory'));
      },
    });
    new Gauge({
      name: `${PREFIX}paused_workers`,
      help: 'Workers whose last heartbeat said they are paused (memory above pause)',
      registers,
      collect() {
        this.set([...engine.workers.values()].filter((w) => w.heartbeat?.paused === true).length);
      },
    });
    new Gauge({
      name: `${PREFIX}worker_bytes`,
      help: 'Bytes per worker from its last heartbeat: resident (store memory), disk (spilled), rss (process), unmanaged; held = sum of result sizes the scheduler records on it',
      labelNames: ['worker', 'name', 'kind'],
      registers,
      collect() {
        this.reset();
        for (const w of engine.workers.values()) {
          const labels = { worker: w.id, name: w.name };
          this.set({ ...labels, kind: 'held' }, w.nbytes);
          const hb = w.heartbeat;
          if (hb === undefined) continue;
          this.set({ ...labels, kind: 'resident' }, num(hb.residentBytes));
          this.set({ ...labels, kind: 'disk' }, num(hb.disk?.bytes));
          this.set({ ...labels, kind: 'rss' }, num(hb.rss));
          this.set({ ...labels, kind: 'unmanaged' }, num(hb.unmanaged));
        }
      },
    });
    new Gauge({
      name: `${PREFIX}worker_processing`,
      help: 'Tasks sent to each worker and not reported back',
      labelNames: ['worker', 'name'],
      registers,
      collect() {
        this.reset();
        for (const w of engine.workers.values()) this.set({ worker: w.id, name: w.name }, w.processing.size);
      },
    });
    const counter = (name: string, help: string, field: keyof Counters): void => {
      let seen = 0;
      new Counter({
        name: `${PREFIX}${name}_total`,
        help,
        registers,
        collect() {
          const now = engine.counters[field];
          if (now > seen) this.inc(now - seen);
          seen = now;
        },
      });
    };
    counter('tasks_finished', 'Tasks whose result reached memory', 'tasksFinished');
    counter('tasks_erred', 'Tasks whose function failed (dependents that erred with them not counted)', 'tasksErred');
    counter('tasks_recomputed', 'Tasks computed again because their result was lost with a worker', 'tasksRecomputed');
    counter('tasks_retried', 'Reruns of tasks that threw, allowed by their retries', 'tasksRetried');
    counter('tasks_killed_workers', 'Tasks failed with SPW_ERR_KILLED_WORKER (more of their workers died than allowedFailures)', 'tasksKilledWorkers');
    counter('workers_lost', 'Workers removed without retiring (connection closed or heartbeats missed)', 'workersLost');
    counter('workers_retired', 'Workers removed after announcing worker-closing', 'workersRetired');
  }

  get contentType(): string {
    return this.#registry.contentType;
  }

  render(): Promise<string> {
    return this.#registry.metrics();
  }
}
