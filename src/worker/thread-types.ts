import type { TaskErrorInfo } from '../cluster/protocol.js';
import type { LiftedView } from './large-views.js';

/** What every executor thread is started with (piscina's workerData). */
export interface ThreadData {
  /** Collect the garbage finished tasks leave once the thread is idle (runtime/thread-collector.ts). */
  collectGarbage: boolean;
  /** Marks values of registered types crossing between the threads (typed-crossing.ts). */
  typedBrand: string;
}

/** What the main thread posts to an executor thread. */
export interface ThreadRequest {
  module: string;
  /** The URL a shipped module came from: errors name it rather than its cached copy. */
  origin?: string;
  name: string;
  args: unknown[];
  /** Views of the args a message cannot carry, lifted out (large-views.ts). */
  views?: LiftedView[];
  /** How many values of registered types the args hold in their crossing form (typed-crossing.ts). */
  typed?: number;
  /** Buffers the caller lent (moved, not copied): handed back in the response's `lent` unless the result holds them. */
  lent?: ArrayBuffer[];
  /** Staging buffers some args are views of (shared): copied into the thread's own memory before the task runs (staging.ts). */
  staged?: SharedArrayBuffer[];
  /** The caller's shared memory some args hold (Executor.run's `share`): not this thread's garbage. */
  shared?: SharedArrayBuffer[];
}

/** What comes back: the value (`views`: as in ThreadRequest), or the error as plain data. `seconds`: time inside the thread. */
export type ThreadResponse =
  | { ok: true; value: unknown; seconds: number; views?: LiftedView[]; typed?: number; lent?: ArrayBuffer[]; lentAt?: number[] }
  | { ok: false; error: TaskErrorInfo; seconds: number; lent?: ArrayBuffer[]; lentAt?: number[] };
