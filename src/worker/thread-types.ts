import type { TaskErrorInfo } from '../cluster/protocol.js';

/** What every executor thread is started with (piscina's workerData). */
export interface ThreadData {
  /** Nice increment the thread applies to itself when it starts (0: none). */
  nice: number;
}

/** What the main thread posts to an executor thread. */
export interface ThreadRequest {
  module: string;
  name: string;
  args: unknown[];
}

/** What comes back: the value, or the error as plain data. `seconds`: time inside the thread. */
export type ThreadResponse =
  | { ok: true; value: unknown; seconds: number }
  | { ok: false; error: TaskErrorInfo; seconds: number };
