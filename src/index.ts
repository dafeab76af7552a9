/**
 * `spillway`: the store, its tiers, the errors, byte units, and the cluster from a client's
 * side (`Client`, `LocalCluster`, the graph helpers). Wire-level pieces are in
 * `spillway/transfer`, the control-plane messages in `spillway/protocol`, tier-testing
 * helpers in `spillway/testing`, the scheduler and worker in `spillway/scheduler` and
 * `spillway/worker` (they load piscina, pino and prom-client, which a store does not need).
 */

// The store
export { SpillStore, type AcquireOptions, type SetOptions } from './store/spill-store.js';
export type { SpillStoreOptions } from './store/options.js';
export type { StoreStats, UnspillableEvent, TierStatsSummary } from './store/stats.js';
export type { ChainTierStats } from './store/chain.js';
export type { CountBytes } from './store/entry.js';
export type { StoreCounters } from './store/counters.js';
export type { EncodedReadStream } from './store/encoded-io.js';
export type { Taken } from './store/take.js';
export { Lease } from './store/lease.js';

// Value types (Apache Arrow built in)
export { registerType, EncodedTypedValue, type ValueType, type ValueClass, type EncodedParts, type DecodedParts } from './codec/types.js';
export { registerArrow } from './codec/arrow.js';

// Tiers
export * from './tiers/index.js';
export type { ReclaimReport, ReclaimedFolder } from './folders/reclaim.js';
export type { OwnerRecord } from './folders/owner.js';

// Errors (those of the scheduler and the worker are in their own entry points)
export {
  SpillwayError,
  InvalidArgumentError,
  CodecError,
  FormatError,
  ChecksumError,
  TypeRegistrationError,
  UnknownTypeError,
  TypeDecodeError,
  KeyNotFoundError,
  ClosedError,
  LeaseReleasedError,
  NotLeasedError,
  SpillCapError,
  TiersFullError,
  TierWriteError,
  TierReadError,
  TierWriteCancelledError,
  GraphError,
  TaskError,
  KilledWorkerError,
  NoWorkersError,
  MemoryHintError,
  DiskFullError,
  TierMissingError,
  TierDuplicateIdError,
  TierNotOpenError,
  TierLengthError,
  TierTruncatedError,
  TierCorruptError,
  TierShortWriteError,
  InternalError,
  NativeModuleError,
} from './errors.js';
export { ProtocolError, ProtocolVersionError, FrameTooLargeError, AuthError, BusyError, TransferError, TransferTimeoutError, RemoteError, TlsError } from './transfer/errors.js';
export type { TlsConfig } from './transfer/tls.js';
export { SchedulerLostError, ResultUnavailableError } from './client/errors.js';
export { ClusterProcessError } from './client/processes.js';
export { StateUnavailableError } from './client/state.js';
export { ModuleBundleError, ModuleRefusedError, UnknownModuleError } from './shipping/errors.js';

// Units
export { parseBytes, formatBytes } from './units.js';

// The cluster, from a client's side
export { Client, type ClientOptions, type ComputeOptions, type ComputeProgress } from './client/client.js';
export type { ShippedModule } from './client/modules.js';
export { LocalCluster, type LocalClusterOptions, type LocalWorkerInfo } from './client/local-cluster.js';
export { Supervisor, type SupervisorOptions, type SupervisedWorker } from './client/supervisor.js';
export type { RestartReason } from './worker/options.js';
export {
  ref,
  literal,
  builtins,
  BUILTINS_MODULE,
  type Graph,
  type TaskSpec,
  type FunctionRef,
  type DataAddress,
  type WhoHasResult,
  type ClusterState,
  type ClusterStateWorker,
  type WorkerHeartbeat,
} from './cluster/protocol.js';

// The peer-to-peer shuffle (docs/graphs.md#shuffle)
export { shuffle, type ShuffleOptions, type ShuffleNodes, MAX_SHUFFLE_OUTPUTS } from './shuffle/protocol.js';
export { ShuffleSplitError, ShuffleIncompleteError, ShuffleStaleRunError, ShuffleDiskFullError, ShufflePushError } from './shuffle/errors.js';

// Typed tasks and futures (docs/graphs.md)
export { defineTasks, Delayed, type Task, type Tasks, type TaskArg, type TaskArgs, type OpaqueValue, type TaskFunction, type TaskOptions, type ResultOf, type ResultsOf, type FuturesOf } from './client/tasks.js';
export { Future, type FutureStatus } from './client/futures.js';
export { FutureReleasedError } from './client/errors.js';
