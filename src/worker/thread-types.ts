import type { TaskErrorInfo } from '../cluster/protocol.js';

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
