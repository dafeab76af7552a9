import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';

/** The collector once looked for: a function, or null where it cannot be had. */
let found: (() => void) | null | undefined;

/**
 * A function that runs a full garbage collection, or undefined where V8 will not expose one
 * (then V8's own heuristics apply). Binary values live outside the JS heap, and V8 sizes
 * its collections by the heap, so dead ArrayBuffers pile up long before it collects for
 * them. Two places collect on purpose: a task thread once idle after tasks with large
 * inputs (their copies die with the task; runtime/thread-collector.ts), and a store under
 * memory pressure once it has dropped enough values (runtime/release-collector.ts).
 *
 * The first call sets V8's `--expose-gc` flag, which is process-wide, unless `gc` is
 * exposed already: only a store opened with `collectGarbage` (and a worker's task threads,
 * when its store collects) call this, never an import.
 */
export function garbageCollector(): (() => void) | undefined {
  if (found === undefined) found = lookForCollector();
  return found ?? undefined;
}

function lookForCollector(): (() => void) | null {
  try {
    const exposed = (globalThis as { gc?: () => void }).gc;
    if (typeof exposed === 'function') return exposed;
    v8.setFlagsFromString('--expose-gc');
    // The flag only adds `gc` to contexts created after it is set.
    const gc: unknown = vm.runInNewContext('gc');
    return typeof gc === 'function' ? (gc as () => void) : null;
  } catch {
    return null;
  }
}

/** What a watcher of V8's major collections is told, on this thread's heap. */
export interface MajorCollectionListener {
  /** Incremental marking started at `atMs` (performance.now()): what is unreachable by then, this cycle frees. */
  markingStarted(atMs: number): void;
  /** A full (mark-compact) collection ended at `endMs` after a pause of `durationMs`: V8's own, or a forced one. */
  collected(endMs: number, durationMs: number): void;
}

const majorListeners = new Set<MajorCollectionListener>();
let gcObserver: PerformanceObserver | undefined;

/**
 * Tells `listener` about each major collection of this thread's heap, as perf_hooks
 * reports it: a loop turn or so late. Returns the function that stops it. One observer
 * serves every listener, and it is disconnected when the last one stops.
 */
export function watchMajorCollections(listener: MajorCollectionListener): () => void {
  majorListeners.add(listener);
  if (gcObserver === undefined) {
    gcObserver = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        // A gc entry's `detail` ({ kind, flags }) is missing from @types/node's PerformanceEntry.
        const { detail } = entry as PerformanceEntry & { detail?: { kind?: number } };
        if (detail?.kind === constants.NODE_PERFORMANCE_GC_INCREMENTAL) {
          for (const l of majorListeners) l.markingStarted(entry.startTime);
        } else if (detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
          for (const l of majorListeners) l.collected(entry.startTime + entry.duration, entry.duration);
        }
      }
    });
    gcObserver.observe({ entryTypes: ['gc'] });
  }
  return () => {
    majorListeners.delete(listener);
    if (majorListeners.size === 0 && gcObserver !== undefined) {
      gcObserver.disconnect();
      gcObserver = undefined;
    }
  };
}

/** How many watchers of major collections are active (for tests: a closed or failed store leaves none). */
export function majorCollectionWatchers(): number {
  return majorListeners.size;
}
