import { GraphError, describeKey } from '../errors.js';
import type { ProgressParams, SubmitResult } from '../cluster/protocol.js';
import type { ValidSubmission } from './graph.js';
import type { Outbox } from './outbox.js';
import type { TaskRecord, TaskTable } from './state.js';
import type { Transitions } from './transitions.js';

export interface ClientRecord {
  readonly id: string;
  readonly name: string;
  readonly wanted: Set<string>;
  /** Keys of the graphs it submitted (dropped once the scheduler forgets them): its progress. */
  readonly tasks: Set<string>;
  readonly since: number;
}

/** The engine's client events: clients join and leave, submit graphs, release keys and ask for their progress. */
export class ClientEvents {
  readonly #clients: Map<string, ClientRecord>;
  readonly #tasks: TaskTable;
  readonly #moves: Transitions;
  readonly #out: Outbox;
  #nextPriority = 0;

  constructor(clients: Map<string, ClientRecord>, tasks: TaskTable, moves: Transitions, out: Outbox) {
    this.#clients = clients;
    this.#tasks = tasks;
    this.#moves = moves;
    this.#out = out;
  }


  add(id: string, name: string): void {
    this.#clients.set(id, { id, name, wanted: new Set(), tasks: new Set(), since: Date.now() });
  }

  /** A client left: everything it wanted is released; work nobody needs any more is cancelled. */
  remove(id: string): void {
    const client = this.#clients.get(id);
    if (client === undefined) return;
    this.release(id, [...client.wanted]);
    this.#clients.delete(id);
  }

  release(id: string, keys: readonly string[]): void {
    const client = this.#clients.get(id);
    if (client === undefined) return;
    for (const key of keys) {
      client.wanted.delete(key);
      this.#tasks.get(key)?.wantedBy.delete(id);
    }
    this.#moves.settle(keys);
    this.#moves.done();
  }

  /** Adds a validated graph. Keys already known keep their records (and results). */
  submit(id: string, submission: ValidSubmission): SubmitResult {
    const client = this.#clients.get(id);
    if (client === undefined) throw new GraphError('submit from an unknown client');
    // Validation yields to the event loop: a known key may have been forgotten meanwhile.
    const adding = new Set(submission.order.filter((t) => !this.#tasks.has(t.key)).map((t) => t.key));
    for (const task of submission.order) {
      for (const dep of task.deps) {
        if (!adding.has(dep) && !this.#tasks.has(dep)) {
          throw new GraphError(`key ${describeKey(dep)} was released while the graph was being checked; submit it again with its task`);
        }
      }
    }
    const missing = submission.wanted.find((key) => !adding.has(key) && !this.#tasks.has(key));
    if (missing !== undefined) throw new GraphError(`key ${describeKey(missing)} was released while the graph was being checked; submit it again with its task`);
    const base = this.#nextPriority;
    this.#nextPriority += submission.order.length;
    submission.order.forEach((task, i) => {
      if (adding.has(task.key)) this.#tasks.add(task.key, task.spec, task.deps, base + i);
    });
    for (const task of submission.order) client.tasks.add(task.key);
    // Validation yields: a known key may have been forgotten meanwhile (and would never leave the set).
    for (const key of submission.known) if (this.#tasks.has(key)) client.tasks.add(key);
    for (const key of submission.wanted) {
      const record = this.#tasks.get(key) as TaskRecord;
      client.tasks.add(key);
      record.wantedBy.add(id);
      client.wanted.add(key);
      if (record.state === 'memory') this.#out.keyReady(id, { key, holders: this.#moves.addresses(record), size: record.size });
      else if (record.state === 'erred' && record.failure !== undefined) this.#out.keyErred(id, { key, ...record.failure });
    }
    this.#moves.settle([...adding, ...submission.wanted]);
    this.#moves.done();
    return { added: adding.size };
  }

  /**
   * The tasks of a client's graphs that the scheduler still knows: computed at least once
   * (a result released after its dependents used it counts), erred, and in all. One pass
   * over them, 4096 a loop turn: clients ask at an
   * interval, not per event, and a count that moves while it is taken is still a progress.
   */
  async progress(id: string): Promise<ProgressParams> {
    const client = this.#clients.get(id);
    const out: ProgressParams = { done: 0, erred: 0, total: 0 };
    if (client === undefined) return out;
    let seen = 0;
    for (const key of client.tasks) {
      if (++seen % 4096 === 0) await new Promise((resolve) => setImmediate(resolve));
      const record = this.#tasks.get(key);
      if (record === undefined) continue; // forgotten while this count yielded
      out.total++;
      if (record.state === 'erred') out.erred++;
      else if (record.computed || record.state === 'memory') out.done++;
    }
    return out;
  }
}
