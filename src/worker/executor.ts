import { Piscina } from 'piscina';
import type { FunctionRef, TaskErrorInfo } from '../cluster/protocol.js';
import { CodecError, errorMessage } from '../errors.js';
import { type ThreadInputs, threadInputs } from './copy-inputs.js';
import { liftLargeViews, restoreLargeViews } from './large-views.js';
import { LOOP_BRAND, liftTypedValues, restoreTypedValues } from './typed-crossing.js';
import { threadNiceIncrement } from '../runtime/thread-priority.js';
import type { ThreadData, ThreadRequest, ThreadResponse } from './thread-types.js';
import type { ResolvedModule } from './module-cache.js';
import { StagingPool } from './staging.js';

export type ExecutionResult =
  | { ok: true; value: unknown; computeSeconds: number; lent?: ArrayBuffer[]; lentAt?: number[] }
  | { ok: false; error: TaskErrorInfo; computeSeconds: number; lent?: ArrayBuffer[]; lentAt?: number[] };

export interface RunOptions {
  /**
   * Buffers moved to the thread as they are, not copied: the caller must hold them alone
   * and not touch them until the task ends. The result's `lent` hands back those the task's
   * result does not hold (the same memory, as new ArrayBuffer objects); none come back if
   * the thread dies. `lentAt` gives each one's index in `lend`.
   */
  lend?: readonly ArrayBuffer[];
  /**
   * Shared memory of the caller's that the arguments hold (a pool it keeps): the thread
   * counts it as neither its own copy nor its garbage once the task ends.
   */
  share?: readonly SharedArrayBuffer[];
}

/**
 * Runs task functions on a pool of worker threads so user code never blocks the event
 * loop. Large binary inputs are copied once and the copies moved to the thread
 * (copy-inputs.ts; docs/cluster.md#worker). Results come back moved
 * (transfer list), not copied.
 */
export class Executor {
  readonly #pool: Piscina<ThreadRequest, ThreadResponse>;
  readonly nthreads: number;

  readonly #moveInputs: boolean;
  readonly #modules: { resolve(fn: FunctionRef): Promise<ResolvedModule> } | undefined;
  /** The staging buffers large inputs cross in. */
  readonly staging: StagingPool;

  /**
   * `moveInputs: false` posts inputs as they are (structured clone), for measurements;
   * `nice` lowers the threads' CPU priority below the event loop's (runtime/thread-priority.ts);
   * `collectGarbage` (default true) has an idle thread collect what its tasks left;
   * `modules` says where a function's module is imported from (shipped modules, allow-list);
   * `stagingBytes` (default 0: none) is the shared memory large inputs may cross in (staging.ts).
   */
  constructor(
    nthreads: number,
    options: { moveInputs?: boolean; nice?: number; collectGarbage?: boolean; modules?: { resolve(fn: FunctionRef): Promise<ResolvedModule> }; stagingBytes?: number } = {},
  ) {
    this.nthreads = nthreads;
    this.#moveInputs = options.moveInputs ?? true;
    this.staging = new StagingPool(options.stagingBytes ?? 0);
    this.#modules = options.modules;
    // Under tsx (development) this file is .ts and so is the thread; compiled, both are .js.
    // Threads inherit process.execArgv, so `--import tsx` reaches them and .ts task modules load.
    const thread = new URL(import.meta.url.endsWith('.ts') ? './thread.ts' : './thread.js', import.meta.url);
    this.#pool = new Piscina<ThreadRequest, ThreadResponse>({
      filename: thread.href,
      minThreads: nthreads,
      maxThreads: nthreads,
      // The worker's own memory-aware queue decides what runs; it never gives the pool more than nthreads.
      idleTimeout: Infinity,
      // Piscina's default ('sync') parks an idle thread in Atomics.wait, which stops its
      // event loop: the collection an idle thread runs (runtime/thread-collector.ts), and V8's own tasks
      // for that thread's heap (finishing a collection, freeing swept ArrayBuffers), then
      // wait for the next task, and the copies of tasks' inputs would stay allocated
      // meanwhile, pushing workers over their limit (docs/cluster.md, "Garbage"). A task
      // costs one message more.
      atomics: 'disabled',
      niceIncrement: threadNiceIncrement(options.nice ?? 0),
      workerData: { collectGarbage: options.collectGarbage ?? true, typedBrand: LOOP_BRAND } satisfies ThreadData,
    });
    // A thread that dies with no task on it (a task's timer threw after it returned) is
    // replaced by the pool, which reports it as 'error': unheard, that would crash the worker.
    this.#pool.on('error', (err: unknown) => this.onThreadError(err));
  }

  /** Told of each thread that died between tasks (the pool has replaced it). */
  onThreadError: (err: unknown) => void = () => undefined;

  async run(fn: FunctionRef, args: unknown[], options: RunOptions = {}): Promise<ExecutionResult> {
    const started = performance.now();
    const lent = new Set(options.lend ?? []);
    // Every staging buffer taken goes back when the task has ended, however it ended: the
    // thread copies the inputs out of them before the task's function runs.
    const staged: SharedArrayBuffer[] = [];
    const stage = (bytes: number): SharedArrayBuffer | undefined => {
      const buffer = this.staging.take(bytes);
      if (buffer !== undefined) staged.push(buffer);
      return buffer;
    };
    try {
      const target: ResolvedModule = this.#modules === undefined ? { module: fn.module } : await this.#modules.resolve(fn);
      const inputs = this.#moveInputs ? await threadInputs(args, LOOP_BRAND, lent, stage) : postedAsTheyAre(args, lent);
      // Views ending past 4 GiB would arrive cut modulo 2^32 (large-views.ts); threadInputs
      // saw every view already, so the walk that lifts them runs only when one does.
      const lifted = inputs.largeViews ? liftLargeViews(inputs.args) : { value: inputs.args, views: [] };
      const request: ThreadRequest = { module: target.module, name: fn.name, args: lifted.value as unknown[] };
      if (target.origin !== undefined) request.origin = target.origin;
      if (lifted.views.length > 0) request.views = lifted.views;
      if (inputs.typedValues > 0) request.typed = inputs.typedValues;
      if (lent.size > 0) request.lent = [...lent];
      if (inputs.staged.length > 0) request.staged = inputs.staged;
      if (options.share !== undefined && options.share.length > 0) request.shared = [...options.share];
      const response = await this.#pool.run(request, { transferList: inputs.transfer });
      const back = response.lent === undefined ? {} : { lent: response.lent, lentAt: response.lentAt ?? [] };
      if (response.ok) {
        let value = restoreLargeViews(response.value, response.views);
        // The loop holds what the task made encoded: it stores and sends it, the next task decodes it.
        if ((response.typed ?? 0) > 0) value = restoreTypedValues(value, LOOP_BRAND, 'keep-encoded');
        return { ok: true, value, computeSeconds: response.seconds, ...back };
      }
      return { ok: false, error: response.error, computeSeconds: response.seconds, ...back };
    } catch (err) {
      // The pool itself failed: arguments or result not cloneable, thread crashed. A result
      // structured clone refuses kills the thread posting it, and its DataCloneError arrives
      // here stripped (a DOMException does not survive the trip): as `{}` on Node 20, as an
      // Error with no message but the original stack on Node 22 and 24. Say what it was.
      const error = isCloneFailure(err) ? uncloneableResult(err) : err instanceof Error ? err : new Error(errorMessage(err));
      return {
        ok: false,
        error: { name: error.name, message: error.message, stack: error.stack, code: codeOf(error) },
        computeSeconds: (performance.now() - started) / 1000,
      };
    } finally {
      for (const buffer of staged) this.staging.give(buffer);
    }
  }

  async close(): Promise<void> {
    await this.#pool.destroy();
  }
}

/** Inputs structured cloned (no copy of ours), but for values of registered types, which cross encoded. */
function postedAsTheyAre(args: unknown[], lent: ReadonlySet<ArrayBuffer>): ThreadInputs {
  const typed = liftTypedValues(args, LOOP_BRAND);
  return { args: typed.value as unknown[], transfer: [...lent], copiedBytes: 0, largeViews: true, typedValues: typed.count, staged: [] };
}

function isCloneFailure(err: unknown): boolean {
  if (err instanceof Error) return err.name === 'DataCloneError' || (err.message === '' && (err.stack ?? '').startsWith('DataCloneError'));
  return typeof err === 'object' && err !== null && Object.keys(err).length === 0;
}

function uncloneableResult(err: unknown): CodecError {
  // "DataCloneError: ()=>1 could not be cloned." where the stack survived.
  const detail = err instanceof Error ? /^DataCloneError: (.*)/.exec(err.stack ?? '')?.[1] : undefined;
  return new CodecError(
    `the task's result cannot be passed back from its thread: it holds something structured clone cannot copy (a function, a symbol, a WeakMap, a Promise...)${detail ? `: ${detail}` : ''}`,
  );
}

function codeOf(err: Error): string | undefined {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}
