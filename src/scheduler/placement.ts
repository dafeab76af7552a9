import { MinHeap } from './heap.js';
import type { TaskRecord, TaskTable } from './state.js';
import { type WorkerRecord, capacity, occupancy } from './workers.js';

/** The queue of ready tasks no worker is better placed for (tasks without inputs). */
const SHARED = '';
/** The `queue` of a ready task with a memory hint (not a worker's queue: it goes where it fits). */
const HINTED = '\u0000memory-hint';

/**
 * Ready tasks wait in queues: one per worker for tasks whose inputs it holds most of, and
 * a shared one for tasks without inputs. A worker with a free slot takes the earliest
 * (lowest priority) task of its own queue and the shared one, and when both are empty
 * steals from the saturated worker with the longest queue, so nobody idles while work waits.
 * Queue entries are checked when popped: a task that left the ready state is skipped.
 */
export class Placement {
  readonly #tasks: TaskTable;
  readonly #workers: ReadonlyMap<string, WorkerRecord>;
  readonly #heaps = new Map<string, MinHeap>([[SHARED, new MinHeap()]]);
  /** Tasks really waiting in each queue (the heaps also hold stale entries). */
  readonly #queued = new Map<string, number>([[SHARED, 0]]);
  /** Ready tasks with a memory hint: each goes to the first worker with a free slot it fits on. */
  readonly #hinted = new Set<TaskRecord>();
  /** The only worker a task may run on (an extension's say), or undefined. */
  restrictedTo: (record: TaskRecord) => string | undefined = () => undefined;

  constructor(tasks: TaskTable, workers: ReadonlyMap<string, WorkerRecord>) {
    this.#tasks = tasks;
    this.#workers = workers;
    tasks.onLeaveReady = (record) => this.#leave(record);
  }

  queued(queue: string): number {
    return this.#queued.get(queue) ?? 0;
  }

  /** Ready tasks with a memory hint, waiting for a worker with room for it. */
  hinted(): ReadonlySet<TaskRecord> {
    return this.#hinted;
  }

  /** Memory the tasks sent to a worker asked for (their hints). */
  reserved(worker: WorkerRecord): number {
    let bytes = 0;
    for (const key of worker.processing) bytes += this.#tasks.get(key)?.memory ?? 0;
    return bytes;
  }

  addWorker(id: string): void {
    this.#heaps.set(id, new MinHeap());
    this.#queued.set(id, 0);
  }

  /** Forgets a worker's queue (it left or is closing); returns its tasks, to enqueue again. */
  takeQueue(id: string): TaskRecord[] {
    const heap = this.#heaps.get(id);
    if (heap === undefined || id === SHARED) return [];
    const out: TaskRecord[] = [];
    for (const entry of heap.drain()) {
      const record = this.#valid(entry.key, id);
      if (record === undefined) continue;
      this.#leave(record);
      record.queue = undefined;
      out.push(record);
    }
    if (!this.#workers.has(id) || this.#workers.get(id)?.closing === true) {
      this.#heaps.delete(id);
      this.#queued.delete(id);
    }
    return out;
  }

  /** Puts a ready task in the queue of the worker that holds most of its input bytes. */
  enqueue(record: TaskRecord): void {
    if (record.memory > 0 && this.restrictedTo(record) === undefined) {
      record.queue = HINTED;
      this.#hinted.add(record);
      return;
    }
    const queue = this.choose(record);
    record.queue = queue;
    this.#heaps.get(queue)?.push({ priority: record.priority, key: record.key });
    this.#queued.set(queue, this.queued(queue) + 1);
  }

  /**
   * The worker for a ready task: most input bytes held (by reported sizes, each input
   * counting at least 1 byte), then least busy; never a closing worker. SHARED when no
   * open worker holds any input.
   */
  choose(record: TaskRecord): string {
    const only = this.restrictedTo(record);
    if (only !== undefined && this.#workers.get(only)?.closing === false) return only;
    if (record.deps.length === 0) return SHARED;
    const bytes = new Map<string, number>();
    for (const dep of record.deps) {
      const input = this.#tasks.get(dep);
      if (input === undefined) continue;
      for (const holder of input.holders) bytes.set(holder, (bytes.get(holder) ?? 0) + Math.max(1, input.size));
    }
    let best: WorkerRecord | undefined;
    let bestBytes = 0;
    let bestLoad = Infinity;
    for (const [id, held] of bytes) {
      const worker = this.#workers.get(id);
      if (worker === undefined || worker.closing) continue;
      const load = occupancy(worker, this.queued(id));
      if (held > bestBytes || (held === bestBytes && load < bestLoad)) {
        best = worker;
        bestBytes = held;
        bestLoad = load;
      }
    }
    return best === undefined ? SHARED : best.id;
  }

  /**
   * The next task for `worker` (removed from its queue), or undefined when there is none;
   * with `steal`, from another worker's queue when its own and the shared one are empty.
   */
  next(worker: WorkerRecord, steal = true): TaskRecord | undefined {
    const own = this.#head(worker.id);
    const shared = this.#head(SHARED);
    const hinted = this.#fitting(worker);
    if (hinted !== undefined && (own === undefined || hinted.priority < own.priority) && (shared === undefined || hinted.priority < shared.priority)) {
      this.#hinted.delete(hinted);
      return hinted;
    }
    if (own !== undefined || shared !== undefined) {
      const takeOwn = own !== undefined && (shared === undefined || own.priority <= shared.priority);
      const queue = takeOwn ? worker.id : SHARED;
      this.#heaps.get(queue)?.pop();
      return takeOwn ? own : shared;
    }
    if (!steal) return undefined;
    // Steal only from a worker that cannot start the task now itself.
    let victim: string | undefined;
    for (const [id, count] of this.#queued) {
      if (id === worker.id || id === SHARED || count === 0 || (victim !== undefined && count <= this.queued(victim))) continue;
      const owner = this.#workers.get(id);
      if (owner === undefined || owner.processing.size >= capacity(owner)) victim = id;
    }
    if (victim === undefined) return undefined;
    const stolen = this.#head(victim);
    if (stolen === undefined || this.restrictedTo(stolen) !== undefined) return undefined;
    this.#heaps.get(victim)?.pop();
    return stolen;
  }

  /**
   * The earliest ready task with a memory hint that fits `worker` now: its hint is at most
   * the worker's memory limit less the hints of the tasks already sent to it.
   */
  #fitting(worker: WorkerRecord): TaskRecord | undefined {
    if (this.#hinted.size === 0 || worker.closing) return undefined;
    const room = worker.memoryLimit - this.reserved(worker);
    let best: TaskRecord | undefined;
    for (const record of this.#hinted) if (record.memory <= room && (best === undefined || record.priority < best.priority)) best = record;
    return best;
  }

  /** The earliest valid task of a queue, dropping stale entries on the way. */
  #head(queue: string): TaskRecord | undefined {
    const heap = this.#heaps.get(queue);
    if (heap === undefined) return undefined;
    for (let entry = heap.peek(); entry !== undefined; entry = heap.peek()) {
      const record = this.#valid(entry.key, queue);
      if (record !== undefined) return record;
      heap.pop();
    }
    return undefined;
  }

  #valid(key: string, queue: string): TaskRecord | undefined {
    const record = this.#tasks.get(key);
    return record !== undefined && record.state === 'ready' && record.queue === queue ? record : undefined;
  }

  #leave(record: TaskRecord): void {
    if (record.queue === HINTED) this.#hinted.delete(record);
    if (record.queue === undefined || record.queue === HINTED) return;
    const count = this.queued(record.queue);
    if (this.#queued.has(record.queue)) this.#queued.set(record.queue, count - 1);
  }
}
