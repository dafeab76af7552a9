import type { DataAddress } from '../cluster/protocol.js';
import type { TaskTable } from './state.js';
import type { WorkerRecord } from './workers.js';

/** What retirement asks of the world: copies to make, and workers to let go. */
export interface RetirementOutbox {
  acquireReplicas(target: WorkerRecord, keys: Record<string, DataAddress[]>): void;
  retired(worker: WorkerRecord): void;
}

/** A key whose copies failed this often is left to be recomputed after its holder leaves. */
const MAX_ATTEMPTS = 3;

/**
 * Graceful retirement (docs/cluster.md#retirement): every key that only a closing worker
 * holds is copied to an open worker, the least loaded, and once none is left and the
 * closing worker runs nothing it is told `retired` and exits. Nothing it held is then
 * recomputed. Copies in flight are tracked per key; a copy that fails is tried again,
 * elsewhere when possible, up to MAX_ATTEMPTS.
 */
export class Retirements {
  /** Per closing worker: keys being copied → the worker copying them. */
  readonly #moving = new Map<string, Map<string, string>>();
  readonly #attempts = new Map<string, number>();
  readonly #told = new Set<string>();
  /** Bytes being copied to each worker (so one target is not given everything). */
  readonly #incoming = new Map<string, number>();

  constructor(
    private readonly tasks: TaskTable,
    private readonly workers: Map<string, WorkerRecord>,
    private readonly out: RetirementOutbox,
    /** True while a closing worker has something else to hand over (a shuffle's pieces). */
    private readonly holds: (worker: WorkerRecord) => boolean = () => false,
  ) {}

  /** Copies still in flight for a closing worker. */
  moving(workerId: string): number {
    return this.#moving.get(workerId)?.size ?? 0;
  }

  /** Plans copies for every closing worker and lets go of those that are done. */
  step(): void {
    for (const worker of this.workers.values()) if (worker.closing && !this.#told.has(worker.id)) this.#step(worker);
  }

  /** A worker reports the copies it made (`keys`) and could not make (`missing`). Returns the keys it should not keep. */
  copied(target: WorkerRecord, keys: readonly string[], missing: readonly string[], addHolder: (key: string) => boolean): string[] {
    const unwanted: string[] = [];
    for (const key of keys) {
      this.#settle(target, key);
      if (!addHolder(key)) unwanted.push(key);
    }
    for (const key of missing) {
      this.#settle(target, key);
      this.#attempts.set(key, (this.#attempts.get(key) ?? 0) + 1);
    }
    return unwanted;
  }

  /** A worker left: copies it was making go elsewhere; its own retirement is over. */
  removed(worker: WorkerRecord): void {
    this.#moving.delete(worker.id);
    this.#told.delete(worker.id);
    this.#incoming.delete(worker.id);
    for (const moving of this.#moving.values()) {
      for (const [key, target] of moving) if (target === worker.id) moving.delete(key);
    }
  }

  #settle(target: WorkerRecord, key: string): void {
    for (const moving of this.#moving.values()) {
      if (moving.get(key) !== target.id) continue;
      moving.delete(key);
      const record = this.tasks.get(key);
      this.#incoming.set(target.id, Math.max(0, (this.#incoming.get(target.id) ?? 0) - (record?.size ?? 0)));
    }
  }

  #step(worker: WorkerRecord): void {
    const open = [...this.workers.values()].filter((w) => !w.closing);
    let moving = this.#moving.get(worker.id);
    if (moving === undefined) this.#moving.set(worker.id, (moving = new Map()));
    let left = 0;
    if (open.length > 0) {
      const batches = new Map<WorkerRecord, Record<string, DataAddress[]>>();
      for (const key of worker.has) {
        const record = this.tasks.get(key);
        if (record === undefined || record.state !== 'memory') continue;
        if ([...record.holders].some((id) => id !== worker.id && this.workers.get(id)?.closing === false)) continue;
        if (moving.has(key)) {
          left++;
          continue;
        }
        const attempts = this.#attempts.get(key) ?? 0;
        if (attempts >= MAX_ATTEMPTS) continue; // recomputed when needed, after this worker leaves
        // The least loaded open worker, counting what is on its way to it; after a failure, another one.
        const candidates = open.filter((w) => !record.holders.has(w.id));
        if (candidates.length === 0) continue;
        const load = (w: WorkerRecord): number => w.nbytes + (this.#incoming.get(w.id) ?? 0);
        candidates.sort((a, b) => load(a) - load(b));
        const target = candidates[attempts % candidates.length];
        moving.set(key, target.id);
        this.#incoming.set(target.id, load(target) - target.nbytes + record.size);
        const batch = batches.get(target) ?? {};
        batch[key] = [worker.data];
        batches.set(target, batch);
        left++;
      }
      for (const [target, keys] of batches) this.out.acquireReplicas(target, keys);
    }
    if (left === 0 && worker.processing.size === 0 && !this.holds(worker)) {
      this.#told.add(worker.id);
      this.#moving.delete(worker.id);
      this.out.retired(worker);
    }
  }
}
