/**
 * The receiving side of a worker's shuffles: pieces pushed here (by peers, or by this
 * worker's own transfers) are appended, still encoded, to per-output buffers, and each
 * buffer goes to the store as one binary value (a chunk) once it is large enough or
 * the buffers together pass their budget. The store spills chunks like any value: as
 * raw bytes, small ones fused into one file per batch. Nothing is decoded here.
 */
import type { SpillStore } from '../store/spill-store.js';
import { ShuffleStaleRunError } from './errors.js';
import type { ShufflePush } from './protocol.js';
import { parseRecordViews } from './records.js';
import { Slicer } from '../loop.js';
import { SizedBufferPool } from '../runtime/sized-buffer-pool.js';
import { Adoptions } from './adoptions.js';
import { ChunkWrites } from './chunk-writes.js';
import { DiskFullWatch } from './disk-full.js';

/** Longest stretch of flushing between loop turns. */
const FLUSH_SLICE_MS = 2;

/**
 * Past the budget, the largest buffers are flushed until this fraction of it is left: with
 * many outputs every buffer is small, and flushing them all makes each chunk as small as it
 * can be (more keys to index, spill and read back). The higher, the larger the buffers
 * flushed, and the more often a flush runs.
 */
const FLUSH_DOWN_TO = 0.75;

/**
 * A buffer whose views (records, or the parts of a record in different socket reads)
 * average at least this size is written through from where they arrived; one of smaller
 * views is laid out in one buffer first (#writeThrough).
 */
const GATHER_FROM_RECORD_BYTES = 16 << 10;

/** Shuffles over whose last run is remembered (to refuse a late push of it), newest kept. */
const FORGOTTEN_IDS = 4096;

export interface ReceiverOptions {
  /** Bytes of pieces held outside the store before the largest buffers are flushed into it. */
  bufferBytes: number;
  /** A buffer this large goes to the store at once. */
  chunkBytes: number;
  /** How long a push waits while the store is paused and its spills fail before it is refused as disk full. */
  diskFullMs?: number;
  /** Where chunk buffers come from (shared with the unpacks that give them back); a pool of its own by default. */
  pool?: SizedBufferPool;
}

/** A push taken in, and how its sender learns that the frame's memory is free again. */
export interface PushParams extends ShufflePush {
  /**
   * Called once (never before accept() has taken the frame in) when nothing here views
   * `data` any more: every record copied into a chunk, or dropped. The caller may then
   * reuse the memory. Without it, the receiver may keep the push's memory as a chunk.
   */
  released?: () => void;
}

/** A frame whose sender wants to know when no record views it any more. */
interface FrameHold {
  /** Output buffers holding views of the frame, plus one while it is being taken in. */
  holders: number;
  readonly released: () => void;
}

interface OutputBuffer {
  /** Views of the pushes' bytes (a record may span several). */
  records: Uint8Array[];
  bytes: number;
  /** Store keys of the chunks flushed so far. */
  chunks: string[];
  /** Frames with a release callback that `records` view. */
  holds: Set<FrameHold>;
}

/** One run of one shuffle as this worker holds it. */
interface RunState {
  readonly id: string;
  readonly run: number;
  readonly outputs: Map<number, OutputBuffer>;
  /** `${input}:${seq}` of the frames taken in. */
  readonly seen: Set<string>;
  nextChunk: number;
}

/**
 * Store keys of shuffle chunks: a NUL can start no key a graph makes by accident, and the
 * rest is unique per chunk. Joined, not concatenated: a worker holds tens of thousands of
 * these keys at high partition counts, and concatenation leaves each as a tree of string
 * pieces several times the size of one flat string.
 */
function chunkKey(id: string, run: number, output: number, n: number): string {
  return ['', 'shuffle', id, run, output, n].join('\u0000');
}

export class ShuffleReceiver {
  readonly #store: SpillStore;
  readonly #options: Required<Omit<ReceiverOptions, 'pool'>>;
  readonly #writes: ChunkWrites;
  readonly #runs = new Map<string, RunState>();
  /** Slots this worker inherits from a retiring one, whose pieces are on their way. */
  readonly #adoptions = new Adoptions();
  /** Shuffles the scheduler said are over → the newest run it named: a late push of it is refused, not held. */
  readonly #forgotten = new Map<string, number>();
  #bufferedBytes = 0;
  /** The budget's flush under way: a push that passes the budget meanwhile waits for it rather than starting another. */
  #flushing: Promise<void> | undefined;
  readonly #diskFull: DiskFullWatch;

  constructor(store: SpillStore, options: ReceiverOptions) {
    this.#store = store;
    const { pool, ...rest } = options;
    this.#options = { diskFullMs: 10_000, ...rest };
    this.#writes = new ChunkWrites(store, pool ?? new SizedBufferPool({ minBytes: 64 << 10, maxBytes: 16 << 20, maxSpareBytes: options.bufferBytes }));
    this.#diskFull = new DiskFullWatch(store);
  }

  /** Bytes of pieces held outside the store. */
  get bufferedBytes(): number {
    return this.#bufferedBytes;
  }

  /** The run of shuffle `id` held here, if any. */
  runOf(id: string): number | undefined {
    return this.#runs.get(id)?.run;
  }

  /** Shuffles this worker holds anything of: a run (pieces, or the frame ids taken in) or an awaited adoption. */
  get heldShuffles(): number {
    return new Set([...this.#runs.keys(), ...this.#adoptions.shuffleIds()]).size;
  }

  /**
   * Takes one pushed frame in. Waits while the store is paused (the sender waits for the
   * answer: that is the shuffle's backpressure); refuses an older run than the one held,
   * and drops what an older run left when a newer one arrives.
   */
  async accept(push: PushParams): Promise<void> {
    const hold: FrameHold | undefined = push.released === undefined ? undefined : { holders: 1, released: push.released };
    try {
      await this.#room();
      this.#takeIn(this.#stateFor(push.id, push.run), `${push.input}:${push.seq}`, push.data, hold);
    } finally {
      if (hold !== undefined) letGo(hold);
    }
    await this.#afterTakeIn(push.id);
  }

  /**
   * Takes in one frame of the pieces a retiring worker held for `slot` (docs/architecture.md,
   * "Retiring a participant"): the same records, under their own frame ids.
   */
  async adopt(id: string, run: number, slot: number, seq: number, data: readonly Uint8Array[]): Promise<void> {
    await this.#room();
    this.#takeIn(this.#stateFor(id, run), `adopt:${slot}:${seq}`, data);
    await this.#afterTakeIn(id);
  }

  /** This worker inherits `slot` of shuffle `id`: its unpacks of `outputs` wait until adopted() (or the run moves on). */
  expect(id: string, run: number, slot: number, outputs: readonly number[]): void {
    if ((this.#forgotten.get(id) ?? -1) >= run) return;
    this.#adoptions.expect(id, run, slot, outputs);
  }

  /** The pieces of `slot` have all come: its unpacks may take them. */
  adopted(id: string, run: number, slot: number): void {
    this.#adoptions.settle(id, (e) => e.run === run && e.slot === slot);
  }

  /** Resolves once no adoption of output `output` of shuffle `id` is under way here, or after `timeoutMs`. */
  async whenAdopted(id: string, output: number, timeoutMs: number): Promise<void> {
    await this.#adoptions.whenSettled(id, output, timeoutMs);
  }

  /**
   * Takes the outputs `outputs` of run `run` of shuffle `id` out, for handing to an heir:
   * the store keys of their chunks (buffers flushed first). The caller deletes the keys.
   */
  handOut(id: string, run: number, outputs: readonly number[]): { output: number; keys: string[] }[] {
    const state = this.#runs.get(id);
    if (state?.run !== run) return [];
    const out: { output: number; keys: string[] }[] = [];
    for (const output of outputs) {
      const buffer = state.outputs.get(output);
      if (buffer === undefined) continue;
      if (buffer.bytes > 0) this.#flush(state, output, buffer);
      state.outputs.delete(output);
      out.push({ output, keys: buffer.chunks });
    }
    return out;
  }

  async #afterTakeIn(id: string): Promise<void> {
    while (this.#runs.has(id) && this.#bufferedBytes > this.#options.bufferBytes) {
      if (this.#flushing === undefined) {
        const flushing = this.#flushLargest().finally(() => {
          if (this.#flushing === flushing) this.#flushing = undefined;
        });
        this.#flushing = flushing;
      }
      await this.#flushing;
    }
  }

  #takeIn(state: RunState, frameId: string, data: readonly Uint8Array[], hold?: FrameHold): void {
    if (state.seen.has(frameId)) return; // a retried push already taken in
    state.seen.add(frameId);
    // Records stay views of the push until their output's buffer is flushed: one copy, into the chunk.
    for (const record of parseRecordViews(data)) {
      let buffer = state.outputs.get(record.output);
      if (buffer === undefined) {
        buffer = { records: [], bytes: 0, chunks: [], holds: new Set() };
        state.outputs.set(record.output, buffer);
      }
      if (hold !== undefined && !buffer.holds.has(hold)) {
        buffer.holds.add(hold);
        hold.holders++;
      }
      for (const view of record.views) buffer.records.push(view);
      buffer.bytes += record.bytes;
      this.#bufferedBytes += record.bytes;
      if (buffer.bytes >= this.#options.chunkBytes) this.#flush(state, record.output, buffer);
    }
  }

  /**
   * Flushes the largest buffers (of any run) until they hold FLUSH_DOWN_TO of their budget,
   * with a loop turn every couple of milliseconds: the budget's worth of copies into chunks
   * at once would block the loop.
   */
  async #flushLargest(): Promise<void> {
    const all: { state: RunState; output: number; buffer: OutputBuffer }[] = [];
    for (const state of this.#runs.values()) {
      for (const [output, buffer] of state.outputs) if (buffer.bytes > 0) all.push({ state, output, buffer });
    }
    all.sort((a, b) => b.buffer.bytes - a.buffer.bytes);
    const slicer = new Slicer(FLUSH_SLICE_MS);
    for (const { state, output, buffer } of all) {
      if (this.#bufferedBytes <= FLUSH_DOWN_TO * this.#options.bufferBytes) return;
      // Taken meanwhile, or its run dropped for a newer one: nothing to flush.
      if (buffer.bytes === 0 || this.#runs.get(state.id) !== state || state.outputs.get(output) !== buffer) continue;
      this.#flush(state, output, buffer);
      if (slicer.due()) await slicer.turn();
    }
  }

  /**
   * Takes output `output` of shuffle `id` out: the store keys of its chunks (the records
   * still buffered are flushed first). The caller deletes the keys once assembled.
   */
  take(id: string, output: number): { run: number; keys: string[] } | undefined {
    const state = this.#runs.get(id);
    if (state === undefined) return undefined;
    const buffer = state.outputs.get(output);
    if (buffer === undefined) return { run: state.run, keys: [] };
    if (buffer.bytes > 0) this.#flush(state, output, buffer);
    state.outputs.delete(output);
    return { run: state.run, keys: buffer.chunks };
  }

  /**
   * Shuffle `id` is over up to run `run` (the scheduler forgot it, or this worker left it):
   * drops that run's pieces and frame ids, settles the adoptions awaited of it, and refuses
   * a push of it that still comes.
   */
  forget(id: string, run: number): void {
    this.#adoptions.settle(id, (e) => e.run <= run);
    const newest = Math.max(run, this.#forgotten.get(id) ?? run);
    this.#forgotten.delete(id); // re-inserted: the newest forgotten are kept
    this.#forgotten.set(id, newest);
    if (this.#forgotten.size > FORGOTTEN_IDS) this.#forgotten.delete(this.#forgotten.keys().next().value as string);
    const state = this.#runs.get(id);
    if (state !== undefined && state.run <= run) this.#drop(state);
  }

  /**
   * Drops every shuffle held here, and the runs remembered as over: this worker lost the
   * scheduler (which restarts the shuffles it took part in, or is a new one numbering runs
   * afresh), or closes.
   */
  reset(): void {
    this.#adoptions.settleAll();
    for (const state of [...this.#runs.values()]) this.#drop(state);
    this.#forgotten.clear();
  }

  /** Drops a run: its buffers, its chunks in the store, and the adoptions awaited of it or older ones (they will not come). */
  #drop(state: RunState): void {
    this.#adoptions.settle(state.id, (e) => e.run <= state.run);
    this.#runs.delete(state.id);
    for (const buffer of state.outputs.values()) {
      this.#bufferedBytes -= buffer.bytes;
      buffer.records = [];
      releaseHolds(buffer);
      for (const key of buffer.chunks) {
        this.#writes.dropped(key);
        this.#store.delete(key);
      }
    }
  }

  /** Resolves once the chunks under `keys` (from take or handOut) are in the store: some may still be being written through. */
  async written(keys: readonly string[]): Promise<void> {
    await this.#writes.written(keys);
  }

  #stateFor(id: string, run: number): RunState {
    const state = this.#runs.get(id);
    if (state !== undefined && run < state.run) {
      throw new ShuffleStaleRunError(`shuffle ${JSON.stringify(id)} is on run ${state.run} here; this push is of run ${run}`);
    }
    if (state !== undefined && run === state.run) return state;
    const over = this.#forgotten.get(id);
    if (over !== undefined && run <= over) throw new ShuffleStaleRunError(`shuffle ${JSON.stringify(id)} is over here up to run ${over}; this push is of run ${run}`);
    if (state !== undefined) this.#drop(state);
    const fresh: RunState = { id, run, outputs: new Map(), seen: new Set(), nextChunk: 0 };
    this.#runs.set(id, fresh);
    return fresh;
  }

  #flush(state: RunState, output: number, buffer: OutputBuffer): void {
    // Records view their frames: a lone record that views a larger buffer is copied too, as
    // stored it would keep the whole frame alive; so is one whose sender wants its frame back.
    const only = buffer.records.length === 1 && buffer.holds.size === 0 ? buffer.records[0] : undefined;
    const key = chunkKey(state.id, state.run, output, state.nextChunk++);
    if (only !== undefined && only.byteOffset === 0 && only.byteLength === only.buffer.byteLength) {
      // Cold: spilling writes the pieces, read only once every input is split, before the values in use.
      this.#store.set(key, only, { cold: true, size: only.byteLength });
    } else if (this.#writes.writesThrough(buffer.bytes)) {
      this.#writeThrough(key, buffer);
    } else {
      // Kept in memory: the one copy of the pieces, into a pooled buffer (chunk-writes.ts).
      this.#writes.set(key, this.#writes.laidOut(buffer.records, buffer.bytes));
    }
    buffer.chunks.push(key);
    this.#bufferedBytes -= buffer.bytes;
    buffer.records = [];
    buffer.bytes = 0;
    releaseHolds(buffer);
  }

  /**
   * Writes a buffer's records through. Large views are written from the frames they view,
   * which the write holds until it has read them; small ones are laid out in a pooled
   * buffer first, as hashing and writing thousands of small pieces one by one costs the
   * loop more than one copy of them.
   */
  #writeThrough(key: string, buffer: OutputBuffer): void {
    if (buffer.bytes >= GATHER_FROM_RECORD_BYTES * buffer.records.length) {
      const holds = buffer.holds;
      buffer.holds = new Set();
      this.#writes.writeGathered(key, buffer.records, buffer.bytes, () => {
        for (const hold of holds) letGo(hold);
      });
    } else {
      const chunk = this.#writes.laidOut(buffer.records, buffer.bytes);
      this.#writes.writeGathered(key, [chunk], buffer.bytes, () => this.#writes.giveBack(chunk));
    }
  }

  /** Waits while the store is paused, or chunks written through pass the buffers' budget; refuses the push once spilling has kept failing for lack of disk. */
  async #room(): Promise<void> {
    const started = Date.now();
    while (this.#writes.bytes > this.#options.bufferBytes) await this.#writes.someWritten();
    while (this.#store.paused) {
      const refusal = this.#diskFull.refusal(started, this.#options.diskFullMs);
      if (refusal !== undefined) throw refusal;
      await Promise.race([this.#store.whenResumed(), new Promise((resolve) => setTimeout(resolve, 250).unref())]);
    }
  }
}

/** The output's records no longer view its frames (copied or dropped): tells each frame's sender once none does. */
function releaseHolds(buffer: OutputBuffer): void {
  for (const hold of buffer.holds) letGo(hold);
  buffer.holds.clear();
}

function letGo(hold: FrameHold): void {
  if (--hold.holders === 0) hold.released();
}
