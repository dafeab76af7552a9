import type { WorkerHeartbeat } from '../cluster/protocol.js';

/** A worker's RSS split into parts that add up to it exactly (docs/metrics.md#worker-metrics). */
export interface MemoryParts {
  managed: number;
  pinned: number;
  detached: number;
  unmanaged: number;
  rss: number;
}

export const MEMORY_PART_TYPES = ['managed', 'pinned', 'detached', 'unmanaged'] as const;

/** Heartbeats are only shape-checked: a missing or odd figure reads as 0. */
export const figure = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0);

/**
 * The store's byte counts are estimates of what its values hold, and a detached value may
 * already be half collected: together they can exceed what the process has resident. The
 * parts are capped in turn (pinned first: a running task holds it for sure; detached last:
 * it is the likeliest to be gone) so they never add up to more than RSS, and unmanaged is
 * the rest.
 */
export function memoryParts(hb: WorkerHeartbeat): MemoryParts {
  const rss = figure(hb.rss);
  let left = rss;
  const take = (bytes: unknown): number => {
    const part = Math.min(figure(bytes), left);
    left -= part;
    return part;
  };
  const pinned = take(hb.pinned?.bytes);
  const managed = take(hb.memory?.bytes);
  const detached = take(hb.detached?.bytes);
  return { managed, pinned, detached, unmanaged: left, rss };
}
