/**
 * Entry of an executor thread (piscina). Imports the task's module (once per thread),
 * calls the function, and returns the result with its ArrayBuffers in the transfer list
 * so they move to the main thread instead of being copied. Errors are returned, not
 * thrown, so their name, stack and code survive the trip (structured clone drops `code`).
 */
import { move, transferableSymbol, valueSymbol, workerData } from 'piscina';
import { SpillwayError } from '../errors.js';
import { TaskFunctionError, TaskImportError } from './errors.js';
import type { ThreadData, ThreadRequest, ThreadResponse } from './thread-types.js';
import { garbageCollector } from '../runtime/garbage-collection.js';
import { buffersIn, isMarkedAsUntransferable, releaseBuffers } from '../runtime/buffer-release.js';
import { ThreadCollector } from '../runtime/thread-collector.js';
import { inputBuffers, takeLeftGarbage } from './thread-garbage.js';
import { unstage } from './staging.js';
import { liftLargeViews, restoreLargeViews } from './large-views.js';
import { LOOP_BRAND, liftTypedValues, restoreTypedValues } from './typed-crossing.js';

const modules = new Map<string, Promise<Record<string, unknown>>>();

/** Below this an ArrayBuffer is copied, not moved: Node's pooled Buffer slabs (8 KiB) cannot be transferred. */
const MIN_TRANSFER_BYTES = 64 * 1024;

/** Collects the copies of finished tasks' inputs once the thread is idle (runtime/thread-collector.ts). */
const collector = threadCollector((workerData as ThreadData | undefined)?.collectGarbage ?? false);

/** The loop's mark on values of registered types crossing in either direction (typed-crossing.ts). */
const typedBrand = (workerData as ThreadData | undefined)?.typedBrand ?? LOOP_BRAND;

function threadCollector(enabled: boolean): ThreadCollector | undefined {
  const collect = enabled ? garbageCollector() : undefined;
  return collect === undefined ? undefined : new ThreadCollector({ collect });
}

/**
 * In development the worker runs under tsx (`node --import tsx`). On Node 20 tsx installs
 * its ESM hooks on the main thread only, so a thread cannot import a .ts module unless it
 * registers them itself, before its first import (a failed import is cached per URL).
 * Registering a second time where tsx already did is harmless (verified on Node 20).
 */
const underTsx = process.execArgv.some((arg) => arg.includes('tsx'));
let tsHooks: Promise<void> | undefined;

function registerTsHooks(): Promise<void> {
  const api = 'tsx/esm/api'; // a dev dependency: resolved at run time, only under tsx
  tsHooks ??= import(api).then(
    (mod: { register: () => unknown }) => void mod.register(),
    () => undefined, // no tsx API: plain .js modules still load
  );
  return tsHooks;
}

async function importModule(specifier: string): Promise<Record<string, unknown>> {
  if (underTsx) await registerTsHooks();
  return (await import(specifier)) as Record<string, unknown>;
}

function load(specifier: string, origin: string | undefined): Promise<Record<string, unknown>> {
  let loaded = modules.get(specifier);
  if (loaded === undefined) {
    loaded = importModule(specifier).catch((err: unknown) => {
      modules.delete(specifier); // a fixed module may be retried
      throw new TaskImportError(origin === undefined ? specifier : `${origin} (shipped, cached as ${specifier})`, err);
    });
    modules.set(specifier, loaded);
  }
  return loaded;
}

export default async function runTask(request: ThreadRequest): Promise<unknown> {
  // A task's message arrives as a new event: the responses of those before it are posted.
  releaseFinished();
  collector?.taskStarted();
  let started = performance.now();
  let stagedCopies: ArrayBuffer[] = [];
  try {
    const mod = await load(request.module, request.origin);
    const fn = mod[request.name];
    if (typeof fn !== 'function') {
      throw new TaskFunctionError(request.origin ?? request.module, request.name, fn === undefined ? 'nothing' : typeof fn);
    }
    started = performance.now(); // compute time is the call's, not the first import's
    let args = restoreLargeViews(request.args, request.views) as unknown[];
    // Inputs that crossed in the loop's staging buffers get memory of this thread's own
    // before anything decodes views of them: the loop takes the staging buffers back once
    // the task is done (staging.ts).
    if (request.staged !== undefined) {
      const unstaged = unstage(args, new Set(request.staged));
      args = unstaged.value as unknown[];
      stagedCopies = unstaged.copies;
    }
    // Decoded with the types the task's module registered, now that it is loaded.
    if ((request.typed ?? 0) > 0) args = restoreTypedValues(args, typedBrand, 'decode') as unknown[];
    const result: unknown = await (fn as (...args: unknown[]) => unknown)(...args);
    const seconds = (performance.now() - started) / 1000;
    // Values of registered types cross as their encoded buffers, moved (typed-crossing.ts).
    const typed = liftTypedValues(result, typedBrand);
    const value = typed.value;
    // Views ending past 4 GiB would arrive cut modulo 2^32 (large-views.ts): their buffers move, they are rebuilt.
    const lifted = liftLargeViews(value);
    const response: ThreadResponse = lifted.views.length === 0 ? { ok: true, value, seconds } : { ok: true, value: lifted.value, seconds, views: lifted.views };
    if (typed.count > 0) response.typed = typed.count;
    const transfers = collectTransfers(value);
    return withLent(response, transfers, request.lent, value);
  } catch (err) {
    const response: ThreadResponse = { ok: false, error: errorInfo(err), seconds: (performance.now() - started) / 1000 };
    return withLent(response, [], request.lent, undefined);
  } finally {
    // The copies of the inputs die with the task. Those this thread alone holds are freed
    // once the response is on its way; what is left (shared buffers, small clones) is
    // collected once the thread is idle. Lent buffers go back to the loop (or with the
    // result): never this thread's garbage.
    // Freed with or without a collector: computed apart, as `?.` would skip its argument.
    const leftBytes = releaseInputsLater(request, stagedCopies) + takeLeftGarbage();
    collector?.taskEnded(leftBytes);
  }
}

/**
 * Frees the task's own copies of its inputs after the response is posted, without a
 * collection: V8 frees a dead buffer only when it collects, and a thread's collections are
 * sized by its few-MiB heap, so each task's copies would cost a forced full collection
 * (runtime/thread-collector.ts). Posting happens as soon as the task's promise settles, before
 * any timer or immediate runs: by then what the result holds has moved or been copied into
 * the message, so detaching the buffers cannot reach it. Returns the binary bytes of the
 * inputs left to the collector: shared ones (this thread's references keep them alive too),
 * small ones and those that cannot move. Lent and staging buffers are neither freed nor
 * counted, nor is the caller's shared memory (`shared`); the copies made of the staged
 * inputs (`stagedCopies`) are freed too.
 */
function releaseInputsLater(request: ThreadRequest, stagedCopies: readonly ArrayBuffer[]): number {
  const kept: ArrayBufferLike[] = [...(request.lent ?? []), ...(request.staged ?? []), ...(request.shared ?? [])];
  const found = inputBuffers([request.args, request.views], kept, (b) => isMarkedAsUntransferable?.(b) === true);
  const own = new Set([...found.own, ...stagedCopies]);
  const leftBytes = found.leftBytes;
  if (own.size > 0) {
    toRelease.push(...own);
    setImmediate(releaseFinished);
  }
  return leftBytes;
}

/** Finished tasks' input copies, freed on the next turn or when the next task starts, whichever comes first. */
const toRelease: ArrayBuffer[] = [];

function releaseFinished(): void {
  if (toRelease.length > 0) releaseBuffers(toRelease.splice(0));
}

/**
 * The response, moving `transfers` and handing the lent buffers back (moved: this thread
 * can no longer read them) but for those the result holds, which travel with it. A lent
 * buffer the task moved elsewhere (detached here) is not handed back. `lentAt` says where
 * in the request's list each one handed back was.
 */
function withLent(response: ThreadResponse, transfers: ArrayBuffer[], lent: ArrayBuffer[] | undefined, value: unknown): unknown {
  if (lent !== undefined && lent.length > 0) {
    const held = buffersIn(value, 0, false);
    const back: ArrayBuffer[] = [];
    const at: number[] = [];
    lent.forEach((b, i) => {
      if (held.has(b)) {
        if (!transfers.includes(b)) transfers.push(b);
      } else if (!isDetached(b)) {
        back.push(b);
        at.push(i);
      }
    });
    if (back.length > 0) {
      response.lent = back;
      response.lentAt = at;
      transfers.push(...back);
    }
  }
  if (transfers.length === 0) return response;
  return move({
    get [transferableSymbol]() {
      return transfers;
    },
    get [valueSymbol]() {
      return response;
    },
  });
}

function isDetached(buffer: ArrayBuffer): boolean {
  return (buffer as { detached?: boolean }).detached ?? buffer.byteLength === 0;
}

function errorInfo(err: unknown): { name: string; message: string; stack?: string; code?: string } {
  if (err instanceof Error) {
    const own = (err as { code?: unknown }).code;
    const code = err instanceof SpillwayError ? err.code : typeof own === 'string' ? own : undefined;
    return { name: err.name, message: err.message, stack: err.stack, code };
  }
  return { name: 'Error', message: `a non-Error was thrown: ${String(err)}` };
}

/** ArrayBuffers (not shared ones: those are not transferred) reachable through arrays, plain objects, Maps and Sets. */
function collectTransfers(value: unknown): ArrayBuffer[] {
  return [...buffersIn(value, MIN_TRANSFER_BYTES, false)].filter(
    (b): b is ArrayBuffer => b instanceof ArrayBuffer && isMarkedAsUntransferable?.(b) !== true,
  );
}
