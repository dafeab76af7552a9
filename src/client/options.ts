import type { ProgressParams } from '../cluster/protocol.js';
import type { TlsConfig } from '../transfer/tls.js';

export interface ClientOptions {
  /** Shared secret of the cluster (scheduler and workers). */
  token?: string;
  /** TLS to the scheduler and to the workers results are fetched from; with a CA, mutual TLS. */
  tls?: TlsConfig;
  /** Memory for results on this side before they spill to disk. Default '256 MiB'. */
  memoryLimit?: number | string;
  /** Parent directory for the client's spill files. Default: the OS temp directory. */
  localDirectory?: string;
  /** Shown by the scheduler. Default: client-<pid>-<8 random hex digits>. */
  name?: string;
  /** How long to keep looking for a result whose holders are gone (it is being recomputed). Default 120 s. */
  resultTimeoutMs?: number;
  /** Keep trying to reach the scheduler this long (ms), with backoff; then SchedulerUnreachableError. Default 120 s. */
  connectTimeoutMs?: number;
  /**
   * Ship the modules graphs name that are local files outside any installed package (and
   * Spillway itself) to the workers, bundled, instead of having the workers import them by
   * path (docs/code-shipping.md). Default true; `uploadModule` ships a module either way.
   */
  shipModules?: boolean;
}

export interface ComputeProgress {
  /** Wanted keys fetched so far, and in all. */
  ready: number;
  wanted: number;
  /**
   * Tasks of this client's graphs (every computation of this client), as the scheduler last
   * reported them; undefined until its first answer.
   */
  tasks?: ProgressParams;
}

export interface ComputeOptions {
  /**
   * Called when a wanted key has been fetched, and every `progressIntervalMs` with the
   * scheduler's count of this client's tasks.
   */
  onProgress?: (progress: ComputeProgress) => void;
  /** How often to ask the scheduler for task counts while `onProgress` is set. Default 500 ms. */
  progressIntervalMs?: number;
  /** Keep the results on the workers after fetching them (release them later with `release`). */
  keep?: boolean;
}
