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
import { ShuffleOverError } from './errors.js';
import { type Logger, silentLogger } from '../log.js';
import type { Engine } from '../scheduler/engine.js';
import type { EngineExtension } from '../scheduler/extension.js';
import { type TaskRecord, isPending } from '../scheduler/state.js';
import type { WorkerRecord } from '../scheduler/workers.js';
import {
  MAX_SHUFFLE_OUTPUTS,
  type ShuffleForgetParams,
  type ShuffleHandedOverParams,
  type ShuffleHandoverParams,
  type ShuffleSlotParams,
  ShuffleWorkerMethods,
  ShuffleFunctions,
  barrierKey,
  type ShuffleRunInfo,
  type UnpackMeta,
  ownerIndex,
  shuffleMetaOf,
} from './protocol.js';

/** A retiring participant's slot on its way to an heir (`sent`: the retiring worker was told to send it). */
interface SlotMove {
  readonly from: WorkerRecord;
  readonly to: WorkerRecord;
  sent: boolean;
}

interface ShuffleState {
  readonly id: string;
  readonly partitions: number;
  run: number;
  participants: WorkerRecord[];
  /** Slots of retiring participants moving to heirs, in this run. */
  readonly moves: Map<number, SlotMove>;
  /** Outputs assembled before this run began: not sent again. */
  done: number[];
  /** The run each transfer reported its pieces went to (shuffle-transferred), until its result is accepted. */
  readonly transferRuns: Map<string, number>;
  /** Outputs that found their pieces incomplete and were run again, in this run. */
  retries: number;
  /** Every worker that took part in a run or inherited a slot: told `shuffle-forget` when the shuffle is over. */
  readonly involved: Set<WorkerRecord>;
}

/** An output's assembly is retried this many times per run before its error stands. */
const RETRIES_PER_RUN = 3;

export class ShuffleExtension implements EngineExtension {
  readonly #engine: Engine;
  readonly #log: Logger;
  readonly #shuffles = new Map<string, ShuffleState>();
  /** Runs are numbered across shuffles: a run number never names two runs, even of one id used again. */
  #lastRun = 0;

  constructor(engine: Engine, log: Logger = silentLogger) {
    this.#engine = engine;
    this.#log = log;
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
    // Only a transfer of a graph the scheduler holds asks: one still running for a shuffle over (released, failed, cancelled) stops.
    if (!this.#engine.tasks.has(barrierKey(p.id))) throw new ShuffleOverError(`shuffle ${JSON.stringify(p.id)} is not in any graph the scheduler holds: it is over`);
    let state = this.#shuffles.get(p.id);
    if (state === undefined) {
      const participants = this.#openWorkers();
      if (participants.length === 0) throw new InvalidArgumentError('no open worker to shuffle on');
      state = { id: p.id, partitions: p.partitions as number, run: ++this.#lastRun, participants, moves: new Map(), done: [], transferRuns: new Map(), retries: 0, involved: new Set(participants) };
      this.#shuffles.set(p.id, state);
    }
    // A restart while no worker was open left the run without participants: nothing could be
    // pushed to it, so it takes the workers open now.
    if (state.participants.length === 0) state.participants = this.#openWorkers();
    for (const worker of state.participants) state.involved.add(worker);
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
    const slot = ownerIndex((found.meta as UnpackMeta).output, state.participants.length);
    const owner = state.moves.get(slot)?.to ?? state.participants[slot];
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

  /**
   * A participant retires: each of its slots with outputs still to assemble gets an heir, an
   * open worker, told to expect the pieces (its unpacks of the slot wait for them); once the
   * barrier is done (every piece is where it belongs) the retiring worker is told to send
   * them. The run goes on: nothing is split or pushed again.
   */
  workerClosing(worker: WorkerRecord): void {
    for (const state of this.#shuffles.values()) {
      if (!state.participants.includes(worker) || this.#pendingUnpacks(state).length === 0) continue;
      state.participants.forEach((participant, slot) => {
        if (participant !== worker || state.moves.has(slot)) return;
        const heir = this.#heir(state, worker);
        if (heir === undefined) return; // nowhere to go: the run restarts when it leaves
        state.moves.set(slot, { from: worker, to: heir, sent: false });
        state.involved.add(heir);
        const params: ShuffleSlotParams = { id: state.id, run: state.run, slot, participants: state.participants.length, partitions: state.partitions };
        this.#engine.notifyWorker(heir, ShuffleWorkerMethods.expect, params);
      });
      if (this.#engine.tasks.get(barrierKey(state.id))?.state === 'memory') this.#sendMoves(state);
    }
  }

  /** A task finished: a shuffle's barrier means every piece is stored, so retiring participants may hand theirs over. */
  finished(record: TaskRecord): void {
    const found = shuffleMetaOf(record.spec);
    if (found?.name !== ShuffleFunctions.barrier) return;
    const state = this.#shuffles.get(found.meta.id);
    if (state !== undefined) this.#sendMoves(state);
  }

  /** True while a retiring worker still has slots to hand over: it is not told `retired` before. */
  holds(worker: WorkerRecord): boolean {
    for (const state of this.#shuffles.values()) {
      // A shuffle over (or failed) meanwhile needs nothing handed over.
      if (![...state.moves.values()].some((move) => move.from === worker)) continue;
      if (this.#pendingUnpacks(state).length > 0) return true;
      state.moves.clear();
    }
    return false;
  }

  /** `shuffle-handed-over` from a retiring worker: its slot is its heir's now (or, failed, the run restarts when it leaves). */
  handedOver(worker: WorkerRecord, params: unknown): void {
    const p = params as Partial<ShuffleHandedOverParams> | null;
    if (typeof p?.id !== 'string' || !Number.isInteger(p.run) || !Number.isInteger(p.slot) || typeof p.ok !== 'boolean') {
      throw new InvalidArgumentError('shuffle-handed-over needs { id, run, slot, ok }');
    }
    const state = this.#shuffles.get(p.id);
    const move = state?.moves.get(p.slot as number);
    if (state === undefined || move === undefined || move.from !== worker || state.run !== p.run) return;
    state.moves.delete(p.slot as number);
    if (p.ok && this.#engine.workers.get(move.to.id) === move.to) {
      state.participants[p.slot as number] = move.to;
      this.#log.info({ shuffle: state.id, run: state.run, slot: p.slot, from: worker.name, to: move.to.name }, "a retiring worker's shuffle outputs moved to another worker");
    } else {
      // The slot's pieces are on a worker that runs no more tasks: the outputs still to assemble need a new run now.
      this.#log.warn({ shuffle: state.id, run: state.run, slot: p.slot, from: worker.name, to: move.to.name, error: p.error }, "a retiring worker could not hand its shuffle outputs over; the shuffle restarts without it");
      this.#restartIfPending(state);
    }
    this.#engine.reconsider();
  }

  workerRemoved(worker: WorkerRecord): void {
    for (const state of [...this.#shuffles.values()]) {
      // An heir lost: the slot it was to inherit has no owner that runs tasks.
      let heirLost = false;
      for (const [slot, move] of state.moves) {
        if (move.from !== worker && move.to !== worker) continue;
        state.moves.delete(slot);
        heirLost ||= move.to === worker;
      }
      if (heirLost || state.participants.includes(worker)) this.#restartIfPending(state);
    }
  }

  /** A new run, when outputs are still to assemble (none without a barrier: the shuffle is over, forgotten() ends it). */
  #restartIfPending(state: ShuffleState): void {
    const barrier = this.#engine.tasks.get(barrierKey(state.id));
    if (barrier === undefined || this.#pendingUnpacks(state).length === 0) return;
    this.#restart(state, barrier, this.#unpacks(barrier));
  }

  #unpacks(barrier: TaskRecord): TaskRecord[] {
    return [...barrier.dependents].map((key) => this.#engine.tasks.get(key)).filter((r): r is TaskRecord => r !== undefined);
  }

  /** Outputs still to assemble (none without a barrier: the shuffle is over). */
  #pendingUnpacks(state: ShuffleState): TaskRecord[] {
    const barrier = this.#engine.tasks.get(barrierKey(state.id));
    if (barrier === undefined) return [];
    return this.#unpacks(barrier).filter((r) => isPending(r.state) || (r.state === 'released' && this.#engine.tasks.needed(r)));
  }

  /** Tells retiring participants to send their slots to their heirs. */
  #sendMoves(state: ShuffleState): void {
    for (const [slot, move] of state.moves) {
      if (move.sent) continue;
      move.sent = true;
      const params: ShuffleHandoverParams = { id: state.id, run: state.run, slot, participants: state.participants.length, partitions: state.partitions, to: move.to.data };
      this.#engine.notifyWorker(move.from, ShuffleWorkerMethods.handover, params);
    }
  }

  /** The open worker owning the fewest slots (counting those on their way), then holding the fewest bytes. */
  #heir(state: ShuffleState, leaving: WorkerRecord): WorkerRecord | undefined {
    const owned = (w: WorkerRecord): number => state.participants.filter((p) => p === w).length + [...state.moves.values()].filter((m) => m.to === w).length;
    const open = this.#openWorkers().filter((w) => w !== leaving);
    open.sort((a, b) => owned(a) - owned(b) || a.nbytes - b.nbytes);
    return open[0];
  }

  #restart(state: ShuffleState, barrier: TaskRecord, unpacks: TaskRecord[]): void {
    // The old run is over on every worker: its pieces and awaited adoptions go, its late pushes are refused.
    this.#tellForget(state);
    state.run = ++this.#lastRun;
    state.participants = this.#openWorkers();
    for (const worker of state.participants) state.involved.add(worker);
    state.moves.clear();
    state.retries = 0;
    state.done = unpacks.filter((r) => r.state === 'memory').map((r) => (shuffleMetaOf(r.spec)?.meta as UnpackMeta).output);
    // Pieces of the finished transfers went to the old run: every one of them runs again.
    this.#engine.invalidate([barrier.key, ...barrier.deps]);
  }

  #openWorkers(): WorkerRecord[] {
    return [...this.#engine.workers.values()].filter((w) => !w.closing);
  }

  /**
   * The scheduler forgot a task: a shuffle's barrier goes once every output is released (or
   * erred, or cancelled), so the shuffle is over. Every worker it involved drops what it
   * holds of it (`shuffle-forget`): pieces never assembled, frame ids, awaited adoptions.
   */
  forgotten(record: TaskRecord): void {
    const found = shuffleMetaOf(record.spec);
    if (found?.name !== ShuffleFunctions.barrier) return;
    const state = this.#shuffles.get(found.meta.id);
    if (state === undefined) return;
    this.#shuffles.delete(state.id);
    this.#tellForget(state);
  }

  /** `shuffle-forget` of the current run (and older ones) to every worker the shuffle involved that is still here. */
  #tellForget(state: ShuffleState): void {
    const params: ShuffleForgetParams = { id: state.id, run: state.run };
    for (const worker of state.involved) if (this.#engine.workers.get(worker.id) === worker) this.#engine.notifyWorker(worker, ShuffleWorkerMethods.forget, params);
  }
}
