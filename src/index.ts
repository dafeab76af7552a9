export { SpillStore, type SetOptions } from './store/spill-store.js';
export type { SpillStoreOptions } from './store/options.js';
export type { StoreStats, UnspillableEvent, TierStatsSummary } from './store/stats.js';
export type { StoreCounters } from './store/counters.js';
export type { EncodedReadStream } from './store/encoded-io.js';
export { Lease } from './store/lease.js';
export * from './tiers/index.js';
export * from './transfer/index.js';
export { encode, encodedBatches, encodeToBuffer, decodeVerified, sizeof, type Encoded } from './codec/index.js';
export { parseBytes, formatBytes } from './units.js';
export * from './errors.js';
export { Client, type ClientOptions, type ComputeOptions, type ComputeProgress } from './client/client.js';
export { LocalCluster, type LocalClusterOptions } from './client/local-cluster.js';
export * from './cluster/protocol.js';
export { SchedulerLostError, ResultUnavailableError } from './client/errors.js';
export { ClusterProcessError } from './client/processes.js';
export { StateUnavailableError } from './client/state.js';
// Scheduler and Worker are the entry points 'spillway/scheduler' and 'spillway/worker': here they
// would load piscina, pino and prom-client into every process that only wants a store.
