import type { EventEmitter } from 'node:events';
import { substitute } from '../cluster/protocol.js';
import { sizeof } from '../codec/index.js';
import { ChecksumError, KeyNotFoundError, TierReadError } from '../errors.js';
import { ShuffleFunctions, isShuffleFunction } from '../shuffle/protocol.js';
import type { ShuffleService } from '../shuffle/worker-service.js';
import type { Lease } from '../store/lease.js';
import type { SpillStore } from '../store/spill-store.js';
import type { DataServer } from '../transfer/server.js';
import { releaseBuffers } from '../runtime/buffer-release.js';
import { ConsumedInputs } from './consumed-inputs.js';
import { builtinFunction } from './builtins.js';
import type { ExecutionResult, Executor } from './executor.js';
import type { Fetcher } from './fetcher.js';
import type { FollowerHold } from './follower-hold.js';
import type { WorkerLifecycle } from './lifecycle.js';
import type { ModuleCache } from './module-cache.js';
import type { WorkerMonitoring } from './monitoring.js';
import type { QueuedTask } from './queue.js';
import type { Room, RoomClaim } from './room.js';
import { type TaskReports, toErrorInfo } from './task-reports.js';
import type { WorkerTasks } from './tasks.js';
import type { ThreadSlot } from './thread-slots.js';

/** Whatever starts the next tasks once one ends or is put back. */
export interface Pump {
  pump(): void;
}

/** The worker's parts a task run works with. */
export interface TaskRunnerParts {
  readonly store: SpillStore;
  /** Where this worker serves its data: named as the holder of a corrupt copy. */
  readonly server: DataServer;
  readonly tasks: WorkerTasks;
  readonly reports: TaskReports;
  readonly life: WorkerLifecycle;
  readonly fetcher: Fetcher;
  readonly executor: Executor;
  readonly shuffle: ShuffleService;
  readonly modules: ModuleCache;
  readonly monitoring: WorkerMonitoring;
  /** Admits thread work against the memory limit, one task at a time. */
  readonly room: Room;
  /** The worker, for its 'task-started' and 'input-corrupt' events. */
  readonly events: EventEmitter;
}

/**
 * Runs one task: pins its inputs, runs its function (a built-in on the loop, a shuffle
 * through the shuffle service, anything else on a task thread), stores the result and
 * reports it.
 */
export class TaskRunner {
  /** Inputs whose copy here was corrupt or unreadable, dropped and recomputed (or fetched again). */
  corruptInputs = 0;
  readonly #parts: TaskRunnerParts;
  readonly #hold: FollowerHold;
  readonly #pump: Pump;
  /** Bytes of the last output of each task function here: the estimate of its next one. */
  readonly #outputBytes = new Map<string, number>();

  constructor(parts: TaskRunnerParts, hold: FollowerHold, pump: Pump) {
    this.#parts = parts;
    this.#hold = hold;
    this.#pump = pump;
  }

  /** `slot`: the task's thread slot (a shuffle task enters it for its thread work only), given back when it ends. */
  async run(task: QueuedTask, slot: ThreadSlot): Promise<void> {
    const { store, tasks, reports, life } = this.#parts;
    tasks.running.set(task.key, task);
    this.#parts.events.emit('task-started', task.key);
    const started = performance.now();
    const builtin = builtinFunction(task.spec.fn);
    let lease: Lease;
    let consumed = new ConsumedInputs();
    // A result pinned for this reader is its to take from here.
    this.#hold.reading(task.inputs);
    try {
      // Inputs this task reads last, taken out of the store: their own memory is lent to the
      // thread (consumed-inputs.ts).
      if (builtin === undefined && this.#mayConsume(task)) consumed = await ConsumedInputs.take(store, task.consumes ?? []);
      // Pinned for the whole task: the inputs cannot be evicted under it. A thread (or the
      // shuffle's split) gets copies of them (or the consumed ones), so the lease keeps no
      // reference once released;
      // a built-in's result may be part of its input, which must then no longer be freed
      // when the store lets go of it.
      lease = await store.acquire(
        task.inputs.filter((key) => !consumed.has(key)),
        { transient: builtin === undefined },
      );
    } catch (err) {
      // The task goes back to the queue or fails here: what it took is the worker's again.
      if (!life.closed) consumed.restore(store);
      tasks.running.delete(task.key);
      slot.end();
      const corrupt = unreadableKey(err, task.inputs);
      if (err instanceof KeyNotFoundError && !life.closed && life.isRetiring) {
        reports.giveBack([task.key]);
      } else if (err instanceof KeyNotFoundError && !life.closed) {
        tasks.queue.add(task); // an input was released meanwhile: fetch it again
      } else if (corrupt !== undefined && !life.closed) {
        this.#dropCorrupt(task, corrupt, err as Error);
      } else if (!life.closed) {
        reports.erred(task.key, toErrorInfo(err));
        tasks.dropReplicas(task.inputs);
      }
      this.#pump.pump();
      return;
    }
    // From here a death of this process counts against the task (allowedFailures).
    reports.started(task.key);
    try {
      const args = substitute(task.spec.args ?? [], (key) => consumed.get(key) ?? lease.get(key));
      const fetchSeconds = task.fetchSeconds + (performance.now() - started) / 1000;
      const shuffle = isShuffleFunction(task.spec.fn);
      const fnKey = `${task.spec.fn.module}#${task.spec.fn.name}`;
      let claim: RoomClaim | undefined;
      if (builtin === undefined && !shuffle) {
        // The thread gets a copy of the inputs, then the output comes back: room for both first.
        // An input lent as it is counts too: the store no longer does.
        const inputBytes = task.inputs.reduce((sum, key) => sum + sizeof(consumed.get(key) ?? lease.get(key)), 0);
        claim = await this.#parts.room.claim(inputBytes + (this.#outputBytes.get(fnKey) ?? inputBytes));
        if (life.closed) return claim.release();
      }
      const result = shuffle
        ? await this.#parts.shuffle.run({ key: task.key, name: task.spec.fn.name, args, thread: slot, consumed: consumed.values.some((v) => v === args[0]) })
        : builtin === undefined
          ? await this.#parts.executor.run(task.spec.fn, args, { lend: consumed.buffers }).finally(() => claim?.release())
          : runInline(builtin, args);
      // A failed task's inputs stay the worker's; a finished one's are freed.
      if (!shuffle && consumed.keys.length > 0) releaseBuffers(consumed.settle(store, result.lent, result.lentAt, !result.ok && !life.closed));
      if (life.closed) return;
      if (!result.ok) {
        reports.erred(task.key, result.error);
        return;
      }
      this.#parts.monitoring.observeTask(this.#parts.modules.named(task.spec.fn), result.computeSeconds);
      const size = sizeof(result.value);
      this.#outputBytes.set(fnKey, size);
      // A thread's result arrived in a message of its own: nothing else here holds it.
      store.set(task.key, result.value, { size, owned: builtin === undefined });
      // Computed here and reported: no longer a copy the scheduler does not know of.
      this.#parts.fetcher.replicas.delete(task.key);
      reports.finished({
        key: task.key,
        size,
        where: store.where(task.key) ?? 'memory',
        computeSeconds: result.computeSeconds,
        fetchSeconds,
      });
      if (task.followed === true) this.#hold.start(task.key, size);
    } catch (err) {
      if (!life.closed) reports.erred(task.key, toErrorInfo(err));
    } finally {
      lease.release();
      tasks.running.delete(task.key);
      slot.end();
      tasks.dropReplicas(task.inputs);
      this.#pump.pump();
    }
  }

  /**
   * Whether the task may be handed inputs it reads last: a thread task, or a shuffle's
   * transfer (its split runs in a thread; shuffle/worker-service.ts lends the input).
   */
  #mayConsume(task: QueuedTask): boolean {
    if ((task.consumes?.length ?? 0) === 0) return false;
    return !isShuffleFunction(task.spec.fn) || task.spec.fn.name === ShuffleFunctions.transfer;
  }

  /**
   * An input's copy here is corrupt or unreadable: it is dropped and the scheduler told, as for
   * data a peer could not deliver; it drops this worker as a holder, recomputes the key from
   * its task if nobody else has it (lineage), and sends the task again.
   */
  #dropCorrupt(task: QueuedTask, key: string, err: Error): void {
    const { store, fetcher, reports, tasks } = this.#parts;
    store.delete(key);
    fetcher.replicas.delete(key);
    this.corruptInputs++;
    this.#parts.events.emit('input-corrupt', { key, task: task.key, error: err });
    reports.missing(task.key, key, [this.#parts.server.address], true);
    tasks.dropReplicas(task.inputs);
  }
}

/** A built-in runs here, on the loop: it is O(1), and a thread would need a copy of its inputs. */
function runInline(fn: (...args: unknown[]) => unknown, args: unknown[]): ExecutionResult {
  const started = performance.now();
  try {
    const value = fn(...args);
    return { ok: true, value, computeSeconds: (performance.now() - started) / 1000 };
  } catch (err) {
    return { ok: false, error: toErrorInfo(err), computeSeconds: (performance.now() - started) / 1000 };
  }
}

/** The input whose stored copy failed its checksum or its read, if that is what `err` is. */
function unreadableKey(err: unknown, inputs: readonly string[]): string | undefined {
  const key = err instanceof ChecksumError || err instanceof TierReadError ? err.key : undefined;
  return key !== undefined && inputs.includes(key) ? key : undefined;
}
