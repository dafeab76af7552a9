import v8 from 'node:v8';
import vm from 'node:vm';

/**
 * A full garbage collection on demand, for the task threads. Binary values live outside
 * the JS heap, and V8 sizes its collections by the heap: a thread's heap is a few MiB and
 * idle between tasks, so the copies of a finished task's inputs (tens of MiB) could stay
 * in RSS for several tasks. A thread collects right after a task with large inputs
 * instead: ~5–10 ms, off the event loop. Undefined where the flag cannot be set (then
 * V8's own heuristics apply).
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
