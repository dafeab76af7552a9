import type { ComputeTaskParams, DataAddress, KeyErredParams, KeyReadyParams } from '../cluster/protocol.js';
import type { WorkerRecord } from './workers.js';

/** Where the engine's decisions go (the Scheduler sends them on channels; tests may record them). */
export interface Outbox {
  computeTask(worker: WorkerRecord, params: ComputeTaskParams): void;
  releaseKeys(worker: WorkerRecord, keys: string[]): void;
  cancelTask(worker: WorkerRecord, key: string): void;
  keyReady(clientId: string, params: KeyReadyParams): void;
  keyErred(clientId: string, params: KeyErredParams): void;
  acquireReplicas(worker: WorkerRecord, keys: Record<string, DataAddress[]>): void;
  /** Start retiring (a client asked). */
  retire(worker: WorkerRecord): void;
  /** Retirement done: exit. */
  retired(worker: WorkerRecord): void;
  /** An extension's notification to a worker (the shuffle's retirement messages). */
  notify?(worker: WorkerRecord, method: string, params: unknown): void;
}
