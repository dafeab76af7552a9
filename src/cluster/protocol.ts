/**
 * The control-plane contract between clients, the scheduler and workers (docs/cluster.md).
 * Every exchange is a request (answered) or a notification (one way) on a `Channel`
 * (src/control). Method names and payload shapes here are the whole protocol: the
 * scheduler, the worker and the client all import them from this one module.
 */

/** Where a worker serves its data (a DataServer). */
export interface DataAddress {
  host: string;
  port: number;
}

/**
 * A function every worker can import: `(await import(module))[name]`. `module` is an absolute
 * file URL, a package name, or a shipped module's address (`spillway:module/<sha256>`).
 */
export interface FunctionRef {
  module: string;
  name: string;
}

/**
 * One task of a graph. Arguments are plain data (msgpack-able). A reference to another
 * key is `{ $ref: 'key' }` anywhere inside an argument (arrays and plain objects are
 * searched); the worker replaces it with that key's value. A literal object that
 * happens to look like a reference is written `{ $literal: value }`.
 */
export interface TaskSpec {
  fn: FunctionRef;
  args?: unknown[];
  /** Times the task is run again when its function throws (default 0). Worker deaths are counted apart (allowedFailures). */
  retries?: number;
  /**
   * Memory the task needs while it runs (bytes, or a size such as '2 GiB'): the scheduler
   * places it only on a worker whose memory limit, less the hints of the tasks it already
   * runs, can take it; a task no connected worker could ever take fails with
   * SPW_ERR_MEMORY_HINT.
   */
  memory?: number | string;
}

/** Module specifier of the built-in functions, which workers run without a thread (docs/graphs.md). */
export const BUILTINS_MODULE = 'spillway:builtins';

/**
 * Built-in task functions. `getitem`: `{ fn: builtins.getitem, args: [ref('parts'), 3] }`
 * is element 3 of the value of `parts` (an array, Map or plain object), taken without
 * copying the whole value into a thread.
 */
export const builtins = {
  getitem: { module: BUILTINS_MODULE, name: 'getitem' },
} as const satisfies Record<string, FunctionRef>;

/** A graph maps keys to tasks. */
export type Graph = Record<string, TaskSpec>;

export interface TaskErrorInfo {
  /** The error's class name, message and stack as the worker saw them. */
  name: string;
  message: string;
  stack?: string;
  /** SpillwayError code when there is one. */
  code?: string;
  /** SPW_ERR_KILLED_WORKER: the name of the last worker that died running the task. */
  worker?: string;
}

/** What a worker's heartbeat carries: its store's stats() in short, and its own. */
export interface WorkerHeartbeat {
  workerId: string;
  /** Bytes held in memory by the store (memory + spilling + pinned). */
  residentBytes: number;
  memory: { count: number; bytes: number };
  pinned: { count: number; bytes: number };
  disk: { count: number; bytes: number };
  detached: { count: number; bytes: number };
  unmanaged: number;
  rss: number;
  paused: boolean;
  /** The spill write error while writes keep failing (a full disk); absent or null when writes land. */
  spillFailure?: string | null;
  /**
   * Longest gap (ms) between the ticks of a 10 ms event-loop delay monitor since the previous
   * heartbeat: the longest block of the loop lies within 10 ms below it (an idle worker reads ~10).
   */
  eventLoopDelayMs: number;
  /** 99th percentile of the same gaps over the same interval (ms). */
  eventLoopDelayP99Ms?: number;
  /** 99th percentile of the same gaps since the worker started (ms). */
  eventLoopDelayRunP99Ms?: number;
  /** Tasks running now and waiting in the worker's queue. */
  executing: number;
  queued: number;
  /** Cumulative: bytes spilled and unspilled by the store, bytes served to peers from disk and from memory. */
  spilledBytes: number;
  unspilledBytes: number;
  servedFromDiskBytes: number;
  servedFromMemoryBytes: number;
  /** Cumulative: bytes fetched from peers, by where they went here (decoded into memory, or written to disk as they came). */
  receivedIntoMemoryBytes?: number;
  receivedIntoDiskBytes?: number;
  /** Cumulative: bytes of shuffle pieces pushed to peers and pushed here by peers (a worker's pieces for itself not counted). */
  shuffleSentBytes?: number;
  shuffleReceivedBytes?: number;
  /** Cumulative: seconds the store spent writing to and reading from its tiers. */
  spillWriteSeconds?: number;
  spillReadSeconds?: number;
  /** Bytes and values held by each tier below memory. */
  tiers?: Array<{ name: string; count: number; bytes: number }>;
  /** Cumulative: the store's errors (failed spills and reads...) by SpillwayError code. */
  spillErrors?: Record<string, number>;
  /** Bytes free for this worker on the file system of its spill folder; null until first measured. */
  diskFreeBytes?: number | null;
  /** The store's pause level in bytes (memory above it pauses the worker); absent when pausing is off. */
  pauseBytes?: number;
  /** Times a supervisor started this worker's slot again, by reason (`exit`, `memory`); absent when not supervised. */
  supervisorRestarts?: Record<string, number>;
}

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

export const Methods = {
  registerWorker: 'register-worker',
  heartbeat: 'heartbeat',
  taskStarted: 'task-started',
  taskFinished: 'task-finished',
  taskErred: 'task-erred',
  missingData: 'missing-data',
  whoHas: 'who-has',
  workerClosing: 'worker-closing',
  addKeys: 'add-keys',
  acquireReplicas: 'acquire-replicas',
  retire: 'retire',
  retired: 'retired',
  retireWorkers: 'retire-workers',
  computeTask: 'compute-task',
  releaseKeys: 'release-keys',
  cancelTask: 'cancel-task',
  /** Notification, scheduler → every other worker: WorkerRemovedParams. */
  workerRemoved: 'worker-removed',
  registerClient: 'register-client',
  submit: 'submit',
  release: 'release',
  keyReady: 'key-ready',
  keyErred: 'key-erred',
  /** Request, client → scheduler: ProgressParams of the client's tasks. */
  progress: 'progress',
  /** Request, client → scheduler: UploadModuleParams → UploadModuleResult. */
  uploadModule: 'upload-module',
  /** Notification, scheduler → worker: ShipModuleParams. */
  shipModule: 'ship-module',
  /** Notification, scheduler → worker: ForgetModuleParams. */
  forgetModule: 'forget-module',
} as const;

/** A `{ $ref: key }` marker. */
export function ref(key: string): { $ref: string } {
  return { $ref: key };
}

/** Escapes a literal that would otherwise read as a reference. */
export function literal(value: unknown): { $literal: unknown } {
  return { $literal: value };
}

/** True for `{ $ref: string }` (exactly that one property). */
export function isRef(value: unknown): value is { $ref: string } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  return keys.length === 1 && keys[0] === '$ref' && typeof (value as { $ref: unknown }).$ref === 'string';
}

/** True for `{ $literal: value }` (exactly that one property). */
export function isLiteral(value: unknown): value is { $literal: unknown } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  return keys.length === 1 && keys[0] === '$literal';
}

/** Every key referenced by a task's arguments, in order, without duplicates. */
export function dependencies(spec: TaskSpec): string[] {
  const found = new Set<string>();
  const visit = (value: unknown): void => {
    if (isRef(value)) found.add(value.$ref);
    else if (isLiteral(value)) return;
    else if (Array.isArray(value)) value.forEach(visit);
    else if (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
      for (const item of Object.values(value)) visit(item);
    }
  };
  (spec.args ?? []).forEach(visit);
  return [...found];
}

/** Replaces references by values (`resolve(key)`) and unwraps literals. */
export function substitute(args: readonly unknown[], resolve: (key: string) => unknown): unknown[] {
  const visit = (value: unknown): unknown => {
    if (isRef(value)) return resolve(value.$ref);
    if (isLiteral(value)) return value.$literal;
    if (Array.isArray(value)) return value.map(visit);
    if (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = visit(v);
      return out;
    }
    return value;
  };
  return args.map(visit);
}
