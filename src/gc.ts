import v8 from 'node:v8';
import vm from 'node:vm';

/**
 * A full garbage collection on demand. Binary values live outside the JS heap, and V8
 * sizes its collections by the heap: with a heap of a few MiB it lets 64 MiB or more of
 * dead ArrayBuffers pile up before it collects for them. Two places collect on purpose:
 * a task thread right after a task with large inputs (their copies die with the task;
 * ~5–10 ms, off the event loop), and a store under memory pressure once it has dropped
 * enough values (store/collector.ts). Undefined where the flag cannot be set (then V8's
 * own heuristics apply).
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
