import { Histogram, type Registry } from 'prom-client';
import type { FunctionRef } from '../cluster/protocol.js';

/** Seconds; from a built-in's microseconds to a long task's minutes. */
const BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** `spillway_task_duration_seconds{function}`: how long task functions ran (on their thread). */
export function taskDurationHistogram(registry: Registry): Histogram<'function'> {
  return new Histogram({
    name: 'spillway_task_duration_seconds',
    help: 'Time task functions ran, by function (module file name without extension, a dot, the export)',
    labelNames: ['function'],
    buckets: BUCKETS,
    registers: [registry],
  });
}

/**
 * A short, bounded label for a task function: `shuffle.split` for export `split` of
 * `file:///srv/jobs/shuffle.js`, `builtins.getitem` for a built-in. The module's full
 * URL would make labels long and tie them to where the code is installed.
 */
export function functionLabel(fn: FunctionRef): string {
  const module = String(fn.module);
  const last = module.split(/[/:\\]/).filter((s) => s !== '').at(-1) ?? module;
  return `${last.replace(/\.(m|c)?(j|t)s$/, '')}.${String(fn.name)}`;
}
