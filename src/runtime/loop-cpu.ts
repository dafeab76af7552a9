import { readFile } from 'node:fs/promises';
import { isMainThread } from 'node:worker_threads';

/** Seconds the event loop's thread has run on a core, and waited runnable for one, since it started. */
export interface LoopCpuTimes {
  runSeconds: number;
  waitSeconds: number;
}

/**
 * The kernel's scheduling times of this process's main thread (Linux:
 * `/proc/self/task/<pid>/schedstat`), or null where they cannot be read: another system, a
 * kernel without scheduler statistics, or a caller off the main thread (whose loop is not
 * the process's main thread). Read asynchronously, so the loop is never held by the file.
 *
 * Why: an event-loop delay is either the loop's own work or time the loop was ready to run
 * and the cores were taken by other threads (task threads, V8's helpers, other processes).
 * The delay histogram cannot tell the two apart; the run queue time can. A worker whose
 * loop waits for a core about as long as it runs is on a host with too few cores for its
 * threads, and shorter turns will not bring its delays down.
 *
 * `onMainThread`: whether the caller's loop is the process's main thread (worker_threads
 * tells; a test may say otherwise).
 */
export async function loopCpuTimes(onMainThread = isMainThread): Promise<LoopCpuTimes | null> {
  if (!onMainThread || process.platform !== 'linux') return null;
  let text: string;
  try {
    text = await readFile(`/proc/self/task/${process.pid}/schedstat`, 'utf8');
  } catch {
    return null;
  }
  // "<ns on a core> <ns runnable, waiting for one> <timeslices>"
  const [run, wait] = text.trim().split(/\s+/).map(Number);
  if (!Number.isFinite(run) || !Number.isFinite(wait)) return null;
  return { runSeconds: run / 1e9, waitSeconds: wait / 1e9 };
}
