import { Registry, collectDefaultMetrics } from 'prom-client';

let shared: Registry | undefined;

/**
 * prom-client's default metrics (CPU, memory, heap, event-loop lag, GC...) describe the
 * process, so one set serves every registry in it. Each set keeps an event-loop delay
 * monitor and a GC observer running for good: collected once, on the first scrape, they
 * cost nothing to a process nobody scrapes, and a test process that opens many schedulers
 * and workers does not pile them up.
 */
function processRegistry(): Registry {
  if (shared === undefined) {
    shared = new Registry();
    collectDefaultMetrics({ register: shared });
  }
  return shared;
}

/** A registry's metrics followed by the process's default ones, in Prometheus text. */
export function renderWithProcessMetrics(registry: Registry): Promise<string> {
  return Registry.merge([registry, processRegistry()]).metrics();
}
