/**
 * Garbage a task leaves in its thread that the thread cannot free at once: the runtime
 * frees the large copies of a task's inputs itself (worker/thread.ts), but code that runs
 * inside a task, such as a shuffle split, knows of other buffers that die with it. It
 * reports them here, and the thread's collector counts them once the task ends
 * (runtime/thread-collector.ts).
 */
let left = 0;

/** The current task leaves `bytes` of garbage for a collection. */
export function leaveGarbage(bytes: number): void {
  if (bytes > 0) left += bytes;
}

/** What the task that just ended reported, reset for the next one. */
export function takeLeftGarbage(): number {
  const bytes = left;
  left = 0;
  return bytes;
}
