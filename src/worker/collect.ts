import v8 from 'node:v8';
import vm from 'node:vm';

/**
 * A full garbage collection on demand. Binary values live outside the JS heap, and V8
 * sizes its collections by the heap: a worker's heap is a few MiB, so tens of MiB of dead
 * buffers can stay in RSS for a long time. Two places collect on purpose:
 * - a task thread, right after a task with large inputs (their structured-clone copies
 *   die with the task): ~5–10 ms, off the event loop;
 * - the worker's main thread, once values the store dropped but that are still alive
 *   (`detached`) pass a threshold (GarbageCollector below).
 * Undefined where the flag cannot be set (then V8's own heuristics apply).
 */
export const collectGarbage: (() => void) | undefined = (() => {
  try {
    const exposed = (globalThis as { gc?: () => void }).gc;
    if (typeof exposed === 'function') return exposed;
    v8.setFlagsFromString('--expose-gc');
    // The flag only adds `gc` to contexts created after it is set.
    const gc: unknown = vm.runInNewContext('gc');
    return typeof gc === 'function' ? (gc as () => void) : undefined;
  } catch {
    return undefined;
  }
})();

export interface GarbageSource {
  /** Bytes that are probably garbage now (dropped by the store, copies of finished tasks' inputs...). */
  garbageBytes(): number;
  /** Called after a collection. */
  collected?(): void;
}

/**
 * Collects on the main thread once the sources' garbage estimate reaches `thresholdBytes`,
 * at most once per `minIntervalMs` (values still really in use, e.g. by a peer's read,
 * survive a collection: without the interval it would collect in a loop).
 */
export class GarbageCollector {
  readonly #timer: NodeJS.Timeout | undefined;
  #last = -Infinity;
  collections = 0;

  constructor(
    private readonly sources: readonly GarbageSource[],
    private readonly thresholdBytes: number,
    private readonly minIntervalMs = 250,
    checkIntervalMs = 50,
  ) {
    if (collectGarbage === undefined) return;
    this.#timer = setInterval(() => this.check(), checkIntervalMs);
    this.#timer.unref();
  }

  check(): void {
    if (collectGarbage === undefined) return;
    const now = performance.now();
    if (now - this.#last < this.minIntervalMs) return;
    let garbage = 0;
    for (const source of this.sources) garbage += source.garbageBytes();
    if (garbage < this.thresholdBytes) return;
    this.#last = now;
    this.collections++;
    collectGarbage();
    for (const source of this.sources) source.collected?.();
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
