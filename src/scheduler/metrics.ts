import { Counter, Gauge, type Histogram, Registry } from 'prom-client';
import type { FunctionRef } from '../cluster/protocol.js';
import { renderWithProcessMetrics } from '../metrics/process.js';
import { functionLabel, taskDurationHistogram } from '../metrics/task-duration.js';
import { registerWorkerFamilies } from '../metrics/worker-families.js';
import type { Counters } from './counters.js';
import type { Engine } from './engine.js';
import { TASK_STATES } from './state.js';

const PREFIX = 'spillway_scheduler_';

/**
 * Prometheus metrics of one scheduler, in a Registry of its own (several schedulers may
 * live in one process, as in tests): its own figures, every connected worker's from its
 * last heartbeat (labelled by the worker's name), task durations, and the process's
 * default metrics. Values are read from the engine at scrape time.
 * Names and meanings: docs/metrics.md.
 */
export class SchedulerMetrics {
  readonly registry = new Registry();
  readonly #durations: Histogram<'function'>;

  constructor(engine: Engine) {
    const registers = [this.registry];
    registerWorkerFamilies(this.registry, () => [...engine.workers.values()].map((w) => ({ name: w.name, memoryLimit: w.memoryLimit, heartbeat: w.heartbeat })));
    this.#durations = taskDurationHistogram(this.registry);
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
      name: `${PREFIX}spill_failing_workers`,
      help: 'Workers whose last heartbeat said their spill writes are failing (a full disk); the error is in /api/state',
      registers,
      collect() {
        this.set([...engine.workers.values()].filter((w) => typeof w.heartbeat?.spillFailure === 'string').length);
      },
    });
    new Gauge({
      name: `${PREFIX}worker_held_bytes`,
      help: 'Sum of the result sizes the scheduler records on each worker',
      labelNames: ['worker'],
      registers,
      collect() {
        this.reset();
        for (const w of engine.workers.values()) this.set({ worker: w.name }, w.nbytes);
      },
    });
    new Gauge({
      name: `${PREFIX}worker_processing`,
      help: 'Tasks sent to each worker and not reported back',
      labelNames: ['worker'],
      registers,
      collect() {
        this.reset();
        for (const w of engine.workers.values()) this.set({ worker: w.name }, w.processing.size);
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
    counter('corrupt_copies', 'Copies of keys a worker found corrupt and dropped (recomputed from their tasks when no other holder had them)', 'corruptCopies');
    counter('tasks_no_workers', 'Tasks failed with SPW_ERR_NO_WORKERS (ready with no worker for noWorkersTimeoutMs)', 'tasksNoWorkers');
    counter('workers_lost', 'Workers removed without retiring (connection closed or heartbeats missed)', 'workersLost');
    counter('workers_retired', 'Workers removed after announcing worker-closing', 'workersRetired');
    counter('keys_handed_over', 'Keys a retiring worker alone held, copied to another worker before it left', 'keysHandedOver');
  }

  observeTask(fn: FunctionRef, seconds: number): void {
    if (Number.isFinite(seconds) && seconds >= 0) this.#durations.observe({ function: functionLabel(fn) }, seconds);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** Its own metrics, then the process's default ones. */
  render(): Promise<string> {
    return renderWithProcessMetrics(this.registry);
  }
}
