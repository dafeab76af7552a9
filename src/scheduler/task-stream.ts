/** One finished task, as the dashboard's task stream shows it. */
export interface TaskStreamEntry {
  /** Increasing number: a reader asks for what came after the last one it saw. */
  seq: number;
  key: string;
  /** The function's short label (metrics/task-duration.ts). */
  fn: string;
  /** The worker's name. */
  worker: string;
  /** Date.now() when the scheduler heard of it. */
  endedAt: number;
  /** Seconds the function ran, and seconds the task waited for its inputs before that. */
  computeSeconds: number;
  fetchSeconds: number;
}

/** The last `capacity` finished tasks, oldest first: a ring, so a long run keeps constant memory. */
export class TaskStream {
  readonly #ring: (TaskStreamEntry | undefined)[];
  #next = 0;
  #seq = 0;

  constructor(readonly capacity = 2000) {
    this.#ring = new Array<TaskStreamEntry | undefined>(capacity);
  }

  add(entry: Omit<TaskStreamEntry, 'seq'>): void {
    this.#ring[this.#next] = { ...entry, seq: ++this.#seq };
    this.#next = (this.#next + 1) % this.capacity;
  }

  /** The last sequence number given out (0 before the first task). */
  get seq(): number {
    return this.#seq;
  }

  /** Entries with a sequence number above `seq`, oldest first, at most `limit` (the newest ones). */
  since(seq: number, limit = this.capacity): TaskStreamEntry[] {
    const count = Math.min(this.#seq - seq, this.capacity, limit);
    const out: TaskStreamEntry[] = [];
    for (let i = count; i > 0; i--) {
      const entry = this.#ring[(this.#next - i + this.capacity) % this.capacity];
      if (entry !== undefined) out.push(entry);
    }
    return out;
  }
}
