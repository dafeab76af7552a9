/**
 * The scheduler's side of the peer-to-peer shuffle (docs/architecture.md#the-p2p-shuffle).
 * It keeps, per shuffle, the current run: its participants (who owns which output) and
 * which outputs are already assembled. Through the engine's extension hooks it places
 * each `unpack` on the owner of its output, refuses a transfer's result when its pieces
 * went to an older run, and restarts the shuffle when a participant is lost while
 * outputs are still to assemble: the run moves on, the finished transfers and the
 * barrier are invalidated, and the transfers run again (their inputs recomputed if
 * released) for the outputs not yet assembled.
 */
import type { TaskErrorInfo } from '../cluster/protocol.js';
import { InvalidArgumentError } from '../errors.js';
import type { Engine } from '../scheduler/engine.js';
import type { EngineExtension } from '../scheduler/extension.js';
import { type TaskRecord, isPending } from '../scheduler/state.js';
import type { WorkerRecord } from '../scheduler/workers.js';
import {
  MAX_SHUFFLE_OUTPUTS,
  ShuffleFunctions,
  barrierKey,
  type ShuffleRunInfo,
  type UnpackMeta,
  ownerIndex,
  shuffleMetaOf,
} from './protocol.js';

interface ShuffleState {
  readonly id: string;
  run: number;
  participants: WorkerRecord[];
  /** Outputs assembled before this run began: not sent again. */
  done: number[];
  /** The run each transfer reported its pieces went to (shuffle-transferred), until its result is accepted. */
  readonly transferRuns: Map<string, number>;
  /** Outputs that found their pieces incomplete and were run again, in this run. */
  retries: number;
}

/** An output's assembly is retried this many times per run before its error stands. */
const RETRIES_PER_RUN = 3;

export class ShuffleExtension implements EngineExtension {
  readonly #engine: Engine;
  readonly #shuffles = new Map<string, ShuffleState>();

  constructor(engine: Engine) {
    this.#engine = engine;
    engine.extension = this;
  }

  /** Shuffles the scheduler tracks. */
  get size(): number {
    return this.#shuffles.size;
  }

  /** `shuffle-get`: the current run of a shuffle, created with the open workers as participants on the first ask. */
  get(params: unknown): ShuffleRunInfo {
    const p = params as { id?: unknown; partitions?: unknown } | null;
    if (typeof p?.id !== 'string' || !Number.isInteger(p.partitions) || (p.partitions as number) < 1 || (p.partitions as number) > MAX_SHUFFLE_OUTPUTS) {
      throw new InvalidArgumentError('shuffle-get needs { id, partitions }');
    }
    this.#prune();
    let state = this.#shuffles.get(p.id);
    if (state === undefined) {
      state = { id: p.id, run: 1, participants: this.#openWorkers(), done: [], transferRuns: new Map(), retries: 0 };
      if (state.participants.length === 0) throw new InvalidArgumentError('no open worker to shuffle on');
      this.#shuffles.set(p.id, state);
    }
    // A restart while no worker was open left the run without participants: nothing could be
    // pushed to it, so it takes the workers open now.
    if (state.participants.length === 0) state.participants = this.#openWorkers();
    if (state.participants.length === 0) throw new InvalidArgumentError('no open worker to shuffle on');
    return { run: state.run, workers: state.participants.map((w) => w.data), done: state.done };
  }

  /** `shuffle-transferred`: the run a transfer's pieces went to; its task-finished follows on the same channel. */
  transferred(params: unknown): void {
    const p = params as { key?: unknown; id?: unknown; run?: unknown } | null;
    if (typeof p?.key !== 'string' || typeof p.id !== 'string' || !Number.isInteger(p.run)) throw new InvalidArgumentError('shuffle-transferred needs { key, id, run }');
    this.#shuffles.get(p.id)?.transferRuns.set(p.key, p.run as number);
  }

  restrictedTo(record: TaskRecord): string | undefined {
    const found = shuffleMetaOf(record.spec);
    if (found?.name !== ShuffleFunctions.unpack) return undefined;
    const state = this.#shuffles.get(found.meta.id);
    if (state === undefined) return undefined;
    const owner = state.participants[ownerIndex((found.meta as UnpackMeta).output, state.participants.length)];
    return this.#engine.workers.get(owner.id) === owner ? owner.id : undefined;
  }

  acceptResult(record: TaskRecord): boolean {
    const found = shuffleMetaOf(record.spec);
    if (found?.name !== ShuffleFunctions.transfer) return true;
    const state = this.#shuffles.get(found.meta.id);
    if (state === undefined) return false;
    const run = state.transferRuns.get(record.key);
    state.transferRuns.delete(record.key);
    return run === state.run;
  }

  retryError(record: TaskRecord, error: TaskErrorInfo): boolean {
    const found = shuffleMetaOf(record.spec);
    if (found?.name !== ShuffleFunctions.unpack || error.code !== 'SPW_ERR_SHUFFLE_INCOMPLETE') return false;
    const state = this.#shuffles.get(found.meta.id);
    if (state === undefined || state.retries >= RETRIES_PER_RUN * state.participants.length) return false;
    state.retries++;
    return true;
  }

  workerRemoved(worker: WorkerRecord): void {
    for (const state of [...this.#shuffles.values()]) {
      if (!state.participants.includes(worker)) continue;
      const barrier = this.#engine.tasks.get(barrierKey(state.id));
      if (barrier === undefined) {
        this.#shuffles.delete(state.id);
        continue;
      }
      const unpacks = [...barrier.dependents].map((key) => this.#engine.tasks.get(key)).filter((r): r is TaskRecord => r !== undefined);
      const pending = unpacks.filter((r) => isPending(r.state) || (r.state === 'released' && this.#engine.tasks.needed(r)));
      if (pending.length === 0) continue;
      this.#restart(state, barrier, unpacks);
    }
  }

  #restart(state: ShuffleState, barrier: TaskRecord, unpacks: TaskRecord[]): void {
    state.run++;
    state.participants = this.#openWorkers();
    state.retries = 0;
    state.done = unpacks.filter((r) => r.state === 'memory').map((r) => (shuffleMetaOf(r.spec)?.meta as UnpackMeta).output);
    // Pieces of the finished transfers went to the old run: every one of them runs again.
    this.#engine.invalidate([barrier.key, ...barrier.deps]);
  }

  #openWorkers(): WorkerRecord[] {
    return [...this.#engine.workers.values()].filter((w) => !w.closing);
  }

  /** Forgets shuffles whose barrier the scheduler no longer knows (finished and released, or cancelled). */
  #prune(): void {
    for (const id of this.#shuffles.keys()) if (!this.#engine.tasks.has(barrierKey(id))) this.#shuffles.delete(id);
  }
}
