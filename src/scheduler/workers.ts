import { isLoopback, isUnspecified } from '../cluster/address.js';
import { InvalidArgumentError } from '../errors.js';
import { AddressError } from '../control/errors.js';
import type { DataAddress, RegisterWorkerParams, WorkerHeartbeat } from '../cluster/protocol.js';

/** What the scheduler knows of one connected worker. */
export interface WorkerRecord {
  readonly id: string;
  readonly name: string;
  readonly data: DataAddress;
  readonly nthreads: number;
  readonly memoryLimit: number;
  readonly pid: number;
  /** Tasks sent to it and not reported back. */
  readonly processing: Set<string>;
  /** Keys it holds (by the scheduler's records). */
  readonly has: Set<string>;
  /** Sum of the reported sizes of the keys it holds. */
  nbytes: number;
  heartbeat: WorkerHeartbeat | undefined;
  /** Date.now() when `heartbeat` came (0 before the first): rates between heartbeats span their arrivals. */
  heartbeatAt: number;
  /** Date.now() of the last message from it. */
  lastSeen: number;
  /** Going away: never given new tasks. */
  closing: boolean;
}

export function newWorker(id: string, params: RegisterWorkerParams): WorkerRecord {
  return {
    id,
    name: params.name,
    data: { host: params.data.host, port: params.data.port },
    nthreads: params.nthreads,
    memoryLimit: params.memoryLimit,
    pid: params.pid,
    processing: new Set(),
    has: new Set(),
    nbytes: 0,
    heartbeat: undefined,
    heartbeatAt: 0,
    lastSeen: Date.now(),
    closing: false,
  };
}

/** Tasks kept in flight on a worker: enough for its memory-aware queue to choose, few enough to rebalance. */
export function capacity(worker: WorkerRecord): number {
  return 2 * worker.nthreads + 2;
}

/** Busy-ness relative to its threads, counting the tasks waiting for it at the scheduler. */
export function occupancy(worker: WorkerRecord, queued: number): number {
  return (worker.processing.size + queued) / worker.nthreads;
}

export function sameAddress(a: DataAddress, b: DataAddress): boolean {
  return a.host === b.host && a.port === b.port;
}

/** Checks a `register-worker` payload; throws InvalidArgumentError naming the bad field. */
export function checkRegisterWorker(params: unknown): RegisterWorkerParams {
  const p = object(params, 'register-worker params');
  const data = object(p.data, 'register-worker data');
  if (typeof p.name !== 'string') throw new InvalidArgumentError('register-worker: name must be a string');
  if (typeof data.host !== 'string' || data.host.length === 0) throw new InvalidArgumentError('register-worker: data.host must be a non-empty string');
  if (!Number.isInteger(data.port) || (data.port as number) <= 0 || (data.port as number) > 65535) {
    throw new InvalidArgumentError('register-worker: data.port must be a TCP port');
  }
  if (!Number.isInteger(p.nthreads) || (p.nthreads as number) < 1) throw new InvalidArgumentError('register-worker: nthreads must be a positive integer');
  if (typeof p.memoryLimit !== 'number' || !(p.memoryLimit >= 0)) throw new InvalidArgumentError('register-worker: memoryLimit must be a number of bytes');
  if (!Number.isInteger(p.pid)) throw new InvalidArgumentError('register-worker: pid must be an integer');
  const keys = p.keys === undefined ? undefined : stringArray(p.keys, 'register-worker: keys');
  return {
    name: p.name,
    data: { host: data.host, port: data.port as number },
    nthreads: p.nthreads as number,
    memoryLimit: p.memoryLimit,
    pid: p.pid as number,
    ...(keys === undefined ? {} : { keys }),
  };
}

/**
 * A worker's advertised data address must be one its peers can reach: one that is loopback
 * or unspecified (0.0.0.0, ::) reaches nobody on another host. Refused when the worker
 * connects from another host (the scheduler and it do not share loopback).
 */
export function checkReachable(data: DataAddress, remoteHost: string): void {
  const local = remoteHost === '' || isLoopback(remoteHost);
  if (isUnspecified(data.host) || (!local && isLoopback(data.host))) {
    throw new AddressError(
      `the worker advertises ${data.host}:${data.port} for its data, which peers on other hosts cannot reach (it connected from ${remoteHost}); ` +
        'start it with --contact-address HOST:PORT (or --host) naming an address of its host that peers can reach',
    );
  }
}

export function object(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InvalidArgumentError(`${what} must be an object`);
  return value as Record<string, unknown>;
}

export function stringArray(value: unknown, what: string): string[] {
  if (!Array.isArray(value) || !value.every((k) => typeof k === 'string')) throw new InvalidArgumentError(`${what} must be an array of strings`);
  return value as string[];
}

export function string(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new InvalidArgumentError(`${what} must be a string`);
  return value;
}
