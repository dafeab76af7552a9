import type { DataAddress, WorkerHeartbeat } from '../cluster/protocol.js';
import type { Counters } from './counters.js';
import type { Engine } from './engine.js';
import type { TaskState } from './state.js';

export interface WorkerSnapshot {
  id: string;
  name: string;
  data: DataAddress;
  nthreads: number;
  memoryLimit: number;
  pid: number;
  closing: boolean;
  /** Tasks sent to it and not reported back; ready tasks waiting at the scheduler for it. */
  processing: number;
  queued: number;
  /** Memory the tasks sent to it asked for (their memory hints). */
  reservedMemory: number;
  /** Keys it holds and the sum of their reported sizes. */
  keys: number;
  bytes: number;
  lastSeenMsAgo: number;
  /** Milliseconds since the last heartbeat came; null until the first. */
  lastHeartbeatMsAgo: number | null;
  lastHeartbeat: WorkerHeartbeat | null;
}

export interface SchedulerState {
  address: { host: string; port: number };
  httpAddress: { host: string; port: number } | null;
  workers: WorkerSnapshot[];
  tasks: Record<TaskState, number> & { total: number };
  /** Ready tasks no worker holds inputs of (tasks without inputs). */
  unplaced: number;
  /** `tasks`: keys of the client's graphs the scheduler still knows (what its progress counts). */
  clients: Array<{ id: string; name: string; wanted: number; tasks: number; connectedSeconds: number }>;
  counters: Counters;
}

export function snapshot(engine: Engine, address: { host: string; port: number }, httpAddress: { host: string; port: number } | undefined): SchedulerState {
  const now = Date.now();
  return {
    address,
    httpAddress: httpAddress ?? null,
    workers: [...engine.workers.values()].map((w) => ({
      id: w.id,
      name: w.name,
      data: w.data,
      nthreads: w.nthreads,
      memoryLimit: w.memoryLimit,
      pid: w.pid,
      closing: w.closing,
      processing: w.processing.size,
      queued: engine.placement.queued(w.id),
      reservedMemory: engine.placement.reserved(w),
      keys: w.has.size,
      bytes: w.nbytes,
      lastSeenMsAgo: now - w.lastSeen,
      lastHeartbeatMsAgo: w.heartbeat === undefined ? null : now - w.heartbeatAt,
      lastHeartbeat: w.heartbeat ?? null,
    })),
    tasks: { ...engine.tasks.counts(), total: engine.tasks.size },
    unplaced: engine.placement.queued(''),
    clients: [...engine.clients.values()].map((c) => ({ id: c.id, name: c.name, wanted: c.wanted.size, tasks: c.tasks.size, connectedSeconds: (now - c.since) / 1000 })),
    counters: { ...engine.counters },
  };
}
