import type { DataAddress, Graph, TaskErrorInfo } from './graph.js';
import type { WorkerHeartbeat } from './heartbeat.js';

// ---- client → scheduler ------------------------------------------------------------

/** Request 'register-client'. Answer: { clientId }. */
export interface RegisterClientParams {
  name: string;
}

/**
 * Request 'submit': add a graph and say which keys the client wants. Answer: SubmitResult.
 * Rejected as a whole, before anything runs, with a GraphError (code SPW_ERR_GRAPH) for a
 * cycle, a reference to a key that is neither in the graph nor already computed, or a
 * malformed task. Keys already known to the scheduler are not recomputed.
 */
export interface SubmitParams {
  graph: Graph;
  wanted: string[];
}
export interface SubmitResult {
  /** Tasks added (keys not already known). */
  added: number;
}

/**
 * Request 'retire-workers': retire these workers (ids `w-N` or names) as on SIGTERM. Answer
 * `{ retired: ids }` once every one of them has left (or failed: unknown names are a
 * SPW_ERR_INVALID_ARG before anything starts).
 */
export interface RetireWorkersParams {
  workers: string[];
}
export interface RetireWorkersResult {
  retired: string[];
}

/** Request 'release': the client no longer wants these keys. Answer: null. */
export interface ReleaseParams {
  keys: string[];
}

/**
 * Request 'upload-module' (client → scheduler): a module bundled with its relative imports
 * (docs/code-shipping.md). `module` is `spillway:module/<sha256 of source>`; `url` the file
 * URL the client bundled, which the allow-lists judge. The scheduler keeps it (within its
 * module cache limit) and sends it to every worker, now and as they register. Answer:
 * UploadModuleResult; refused with SPW_ERR_MODULE_REFUSED outside the allow-list.
 */
export interface UploadModuleParams {
  url: string;
  module: string;
  source: string;
}
export interface UploadModuleResult {
  module: string;
  /** Workers it was sent to now (0 when the scheduler held it already: the workers have it). */
  workers: number;
}

// ---- scheduler → client ------------------------------------------------------------

/** Notification 'key-ready': a wanted key is computed; fetch it from `holders`. */
export interface KeyReadyParams {
  key: string;
  holders: DataAddress[];
  size: number;
}

/** Notification 'key-erred': a wanted key (or one it depends on) failed. */
export interface KeyErredParams {
  key: string;
  /** The key whose task threw (may be a dependency of `key`). */
  failedKey: string;
  error: TaskErrorInfo;
}

// ---- additions for the client and the CLI (optional: nothing above depends on them) ----

/**
 * Request 'progress' (client → scheduler, no params), answered with the tasks of this
 * client's graphs that the scheduler still knows (keys it forgot, released by every client,
 * no longer count).
 */
export interface ProgressParams {
  /** Tasks computed at least once (a result released after use still counts), erred, and in all. */
  done: number;
  erred: number;
  total: number;
}

/** One worker in `GET /api/state` (the fields the client and CLI read). */
export interface ClusterStateWorker {
  id: string;
  name: string;
  pid: number;
  memoryLimit: number;
  nthreads: number;
  data: DataAddress;
  /** Keys it holds. */
  keys: number;
  /** The last heartbeat received; null until the first one. */
  lastHeartbeat: WorkerHeartbeat | null;
}

/**
 * What the client and the CLI read from the scheduler's `GET /api/state` (the scheduler
 * adds more). `tasks`: count of tasks by state (released, waiting, ready, processing,
 * memory, erred) and `total`.
 */
export interface ClusterState {
  workers: ClusterStateWorker[];
  tasks: Record<string, number>;
  clients: Array<{ id: string; name: string; wanted: number }>;
}
