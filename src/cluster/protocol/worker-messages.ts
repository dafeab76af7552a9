import type { UploadModuleParams } from './client-messages.js';
import type { DataAddress, TaskErrorInfo, TaskSpec } from './graph.js';

// ---- worker → scheduler ------------------------------------------------------------

/** Request 'register-worker'. Answer: RegisterWorkerResult. */
export interface RegisterWorkerParams {
  name: string;
  data: DataAddress;
  memoryLimit: number;
  nthreads: number;
  pid: number;
  /**
   * Keys the worker already holds (in memory or spilled): sent when it registers again after
   * losing the scheduler. The scheduler records it as a holder of those it still needs and
   * releases the others.
   */
  keys?: string[];
}
export interface RegisterWorkerResult {
  workerId: string;
  /** Send a 'heartbeat' notification this often (ms). */
  heartbeatIntervalMs: number;
}

/** Notification 'heartbeat': WorkerHeartbeat. */

/**
 * Notification 'task-started': the worker began running `key` (its inputs are here). A task
 * counts against `allowedFailures` only if its worker dies after saying so: tasks merely
 * queued there are innocent.
 */
export interface TaskStartedParams {
  workerId: string;
  key: string;
}

/** Notification 'task-finished'. `size`: in-memory bytes of the result (store estimate). */
export interface TaskFinishedParams {
  workerId: string;
  key: string;
  size: number;
  /** 'memory' or the tier the result went to. */
  where: string;
  /** Seconds the function ran, and seconds spent getting its inputs. */
  computeSeconds: number;
  fetchSeconds: number;
}

/** Notification 'task-erred': the function threw (or its inputs could not be had). */
export interface TaskErredParams {
  workerId: string;
  key: string;
  error: TaskErrorInfo;
}

/**
 * Notification 'missing-data': the worker could not get `key` from any holder the
 * scheduler named (dead, or it no longer has it). The scheduler corrects its records
 * (and recomputes the key if nobody has it), then sends the task again.
 */
export interface MissingDataParams {
  workerId: string;
  /** The task that needed the data. */
  task: string;
  key: string;
  /** Holders that failed. */
  holders: DataAddress[];
  /** The reporting worker's own copy failed its checksum (or could not be read) and was dropped. */
  corrupt?: boolean;
}

/** Request 'who-has' (from workers and clients): current holders of keys. */
export interface WhoHasParams {
  keys: string[];
}
export type WhoHasResult = Record<string, DataAddress[]>;

/**
 * Notification 'worker-closing': the worker is leaving on purpose (it retires). The
 * scheduler places no new task on it, places `reschedule` (compute-tasks it had queued and
 * will not run) elsewhere, and has every key only it holds copied to other workers
 * (`acquire-replicas`); once that is done and its running tasks have finished, it sends
 * `retired`. Sent again for a compute-task that arrives meanwhile. Without a payload (older
 * workers) it only stops new tasks.
 */
export interface WorkerClosingParams {
  reschedule?: string[];
}

/**
 * Notification 'add-keys': the worker now holds these keys, fetched for `acquire-replicas`
 * (`missing`: the ones it could not get from the holders named).
 */
export interface AddKeysParams {
  workerId: string;
  keys: string[];
  missing: string[];
}

// ---- scheduler → worker ------------------------------------------------------------

/**
 * Notification 'compute-task': run `spec` and store its result under `key`. `deps` lists,
 * for each key the task refers to, the workers holding it (this worker's own address
 * included when it holds it). `priority`: lower runs first among ready tasks.
 */
export interface ComputeTaskParams {
  key: string;
  spec: TaskSpec;
  deps: Record<string, DataAddress[]>;
  priority: number;
  /**
   * A dependent waits only for this result: the scheduler sends it as soon as this one
   * finishes, so the worker may keep a thread free for it a moment rather than start
   * another task whose room-making would spill the result first.
   */
  followed?: boolean;
  /**
   * Inputs this task reads last: no other task still to run needs them and no client
   * wants them. A worker holding one in memory, alone, may hand the task that memory
   * instead of a copy, and drop the key.
   */
  consumes?: string[];
}

/** Notification 'release-keys': delete these keys (nobody needs them any more). */
export interface ReleaseKeysParams {
  keys: string[];
}

/**
 * Notification 'acquire-replicas': fetch each key from the holders named and keep it (a
 * retiring worker's data moving here); answered by `add-keys`. Spilled values travel as
 * their encoded bytes, streamed from the holder's disk and written to this store as they are.
 */
export interface AcquireReplicasParams {
  keys: Record<string, DataAddress[]>;
}

/** Notification 'retire' (scheduler → worker): retire as on SIGTERM (a client or the HTTP route asked). */

/** Notification 'retired' (scheduler → worker): another worker holds everything only you held, and you run nothing: exit. */

/** Notification 'cancel-task': forget a queued task (its result is no longer wanted). */
export interface CancelTaskParams {
  key: string;
}

/** Notification 'worker-removed': the scheduler removed this worker; stop fetching from its DataServer. */
export interface WorkerRemovedParams {
  workerId: string;
  data: DataAddress;
}

/**
 * Notification 'ship-module': a shipped module (UploadModuleParams) to cache and import
 * for tasks naming `module`. Sent before any compute-task naming it on the same channel.
 */
export type ShipModuleParams = UploadModuleParams;

/** Notification 'forget-module': the scheduler dropped this shipped module; delete the cached copy. */
export interface ForgetModuleParams {
  module: string;
}
