/**
 * A worker's side of the peer-to-peer shuffle: runs the shuffle's tasks (`transfer`,
 * `barrier`, `unpack`) and takes in the pieces peers push (ShuffleReceiver). The user's
 * split and combine run on the worker's task threads (thread-tasks.ts); the event loop
 * only moves encoded bytes.
 */
import type tls from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FunctionRef, TaskErrorInfo } from '../cluster/protocol.js';
import { sizeof } from '../codec/index.js';
import type { Channel } from '../control/channel.js';
import { InvalidArgumentError, SpillwayError, errorMessage } from '../errors.js';
import type { SpillStore } from '../store/spill-store.js';
import { RemoteError } from '../transfer/errors.js';
import type { ExecutionResult, Executor } from '../worker/executor.js';
import { Room } from '../worker/room.js';
import { type ThreadSlot, UNCOUNTED_SLOT } from '../worker/thread-slots.js';
import { ShuffleDiskFullError, ShufflePushError } from './errors.js';
import {
  ADOPT_OP,
  PUSH_OP,
  type ShuffleForgetParams,
  type ShuffleHandedOverParams,
  type ShuffleHandoverParams,
  type ShuffleSlotParams,
  ShuffleFunctions,
  ShuffleMethods,
  isShuffleSlot,
  outputsOfSlot,
  parsePush,
  type ShuffleRunInfo,
  type ShuffleTransferredParams,
  type TransferMeta,
  type UnpackMeta,
} from './protocol.js';
import { FrameLoan, FrameSpares, frameSpareCount } from './frame-spares.js';
import { InputSpares, lendableCopy } from './input-spares.js';
import { lendableWhole, rebuilt } from '../worker/consumed-inputs.js';
import { releaseBuffers } from '../runtime/buffer-release.js';
import { PeerPool } from './peer-pool.js';
import { chunkFrames } from './chunk-frames.js';
import { SizedBufferPool } from '../runtime/sized-buffer-pool.js';
import { giveBack, takeChunks } from './chunk-loans.js';
import { ShuffleReceiver } from './receiver.js';
import type { AssembleRequest, SplitRequest, SplitResult } from './thread-tasks.js';

/** Largest push frame: well under the data plane's 16 MiB frame limit. */
export const FRAME_BYTES = 4 * 1024 * 1024;

/** How long spare frames and input copies are kept with no transfer under way. */
const SPARES_IDLE_MS = 2_000;

const THREAD_MODULE = new URL(import.meta.url.endsWith('.ts') ? './thread-tasks.ts' : './thread-tasks.js', import.meta.url).href;
const fn = (name: string): FunctionRef => ({ module: THREAD_MODULE, name });

export interface ShuffleServiceOptions {
  store: SpillStore;
  /** Runs the split and the assembly on the task threads. */
  executor: Pick<Executor, 'run'>;
  /** The control channel to the scheduler (a getter: the worker replaces it when it registers again). */
  channel: () => Channel;
  token: string | undefined;
  /** TLS settings for connections to peers, when the cluster speaks TLS. */
  tls?: tls.ConnectionOptions;
  /** This worker's data address: pieces for itself are not sent over a socket. */
  self: { host: string; port: number };
  /** How long a transfer keeps retrying pushes to a peer that fails, waiting for the scheduler to restart the shuffle. */
  retryMs?: number;
  /** Admits thread work against the memory limit, shared with the worker's other tasks. Default: one of its own. */
  room?: Room;
}

interface RunningTask {
  key: string;
  name: string;
  args: unknown[];
  /** The task's thread slot (src/worker/thread-slots.ts): entered for its thread work only, given up while it pushes. */
  thread?: Pick<ThreadSlot, 'enter' | 'leave'>;
  /** A transfer's input was taken out of the store for it (worker/consumed-inputs.ts): its split borrows the input's own memory, no copy. */
  consumed?: boolean;
}

export class ShuffleService {
  readonly receiver: ShuffleReceiver;
  readonly #options: ShuffleServiceOptions;
  readonly #peers: PeerPool;
  readonly #retryMs: number;
  readonly #room: Room;
  /** Buffers of chunks: laid out by the receiver, read back from disk, lent to the assembling thread. */
  readonly #chunkPool: SizedBufferPool;
  /** Frames pushed and given back, lent to the next split (frame-spares.ts). */
  readonly #frameSpares: FrameSpares;
  /** Copies of splits' inputs handed back by their threads (input-spares.ts). */
  readonly #inputSpares: InputSpares;
  /** Transfers under way: with none for a while (or when a shuffle ends), the spares are let go. */
  #transfers = 0;
  #sparesTimer: NodeJS.Timeout | undefined;
  /** Cumulative bytes of pieces pushed to peers and received from them (the transfer metrics). */
  readonly bytes = { sent: 0, received: 0 };
  /** Chunk buffers handed out by the pool: reused vs allocated (cumulative). */
  get chunkBuffers(): { reused: number; allocated: number } {
    return { reused: this.#chunkPool.reused, allocated: this.#chunkPool.allocated };
  }
  /** Cumulative frames the splits laid out in a spare buffer vs in one they allocated. */
  readonly frames = { reused: 0, allocated: 0 };

  /** Cumulative copies of splits' inputs made into a spare buffer vs into a new one. */
  get inputCopies(): { reused: number; allocated: number } {
    return { reused: this.#inputSpares.reused, allocated: this.#inputSpares.allocated };
  }

  /** Bytes of shared memory the frame pool holds, which the store does not count (frame-spares.ts). */
  get sharedFrameBytes(): number {
    return this.#frameSpares.madeBytes;
  }

  constructor(options: ShuffleServiceOptions) {
    this.#options = options;
    this.#retryMs = options.retryMs ?? 120_000;
    this.#room = options.room ?? new Room(options.store);
    const limit = options.store.memoryLimit;
    const bufferBytes = Math.max(1 << 20, Math.min(64 << 20, Math.floor(limit / 16)));
    this.#chunkPool = new SizedBufferPool({ minBytes: 64 << 10, maxBytes: 16 << 20, maxSpareBytes: Math.max(4 << 20, Math.floor(bufferBytes / 2)) });
    this.receiver = new ShuffleReceiver(options.store, {
      bufferBytes,
      chunkBytes: Math.max(256 << 10, Math.min(4 << 20, Math.floor(limit / 64))),
      pool: this.#chunkPool,
    });
    this.#peers = new PeerPool(options.token, options.tls);
    this.#frameSpares = new FrameSpares(FRAME_BYTES, frameSpareCount(limit, FRAME_BYTES));
    this.#inputSpares = new InputSpares(Math.max(4 << 20, Math.min(256 << 20, Math.floor(limit / 64))));
  }

  /** The data plane's generic requests: pushes of pieces (their records as the request's raw payload). */
  async onRequest(body: unknown, payload?: readonly Uint8Array[]): Promise<unknown> {
    if ((body as { op?: unknown } | null)?.op === ADOPT_OP) return await this.#onAdopt(body, payload);
    const push = parsePush(body, payload);
    await this.receiver.accept(push);
    this.bytes.received += push.data.reduce((sum, part) => sum + part.byteLength, 0);
    return null;
  }

  async run(task: RunningTask): Promise<ExecutionResult> {
    const started = performance.now();
    try {
      switch (task.name) {
        case ShuffleFunctions.transfer:
          return await this.#transfer(task.key, task.args[0], task.args[1] as TransferMeta, task.thread ?? UNCOUNTED_SLOT, task.consumed === true);
        case ShuffleFunctions.barrier:
          return { ok: true, value: (task.args[0] as unknown[]).length, computeSeconds: 0 };
        case ShuffleFunctions.unpack:
          return await this.#unpack(task.args[1] as UnpackMeta, task.thread ?? UNCOUNTED_SLOT);
        default:
          throw new InvalidArgumentError(`spillway:shuffle has no function "${task.name}"`);
      }
    } catch (err) {
      return { ok: false, error: toErrorInfo(err), computeSeconds: (performance.now() - started) / 1000 };
    }
  }

  /** Drops everything held of every shuffle: the worker closes. */
  close(): void {
    this.receiver.reset();
    this.#peers.close();
    this.#letSparesGo();
    this.#chunkPool.clear();
  }

  /** Frees the input copies kept for reuse; the frame spares are shared memory the worker keeps (frame-spares.ts). */
  #letSparesGo(): void {
    clearTimeout(this.#sparesTimer);
    this.#inputSpares.clear();
  }

  /** `shuffle-forget`: the scheduler forgot the shuffle (its graph released, failed or cancelled). */
  forget(params: ShuffleForgetParams): void {
    if (typeof params?.id !== 'string' || !Number.isInteger(params.run)) return;
    this.receiver.forget(params.id, params.run);
    if (this.#transfers === 0) this.#letSparesGo();
    // No shuffle left here: spare chunk buffers would only hold memory the store does not see.
    if (this.receiver.heldShuffles === 0) this.#chunkPool.clear();
  }

  /** The scheduler made this worker the heir of a retiring participant's slot: its unpacks of that slot wait for the pieces. */
  expect(params: ShuffleSlotParams): void {
    if (!isShuffleSlot(params)) return;
    this.receiver.expect(params.id, params.run, params.slot, outputsOfSlot(params.slot, params.participants, params.partitions));
  }

  /**
   * This worker retires: sends the pieces it holds for `slot` (chunks in the store: raw
   * records, never decoded; a spilled one streamed from its tier, not read back into
   * memory) to the heir, framed along record boundaries, then tells the heir and the
   * scheduler that the slot has moved.
   */
  async handover(params: ShuffleHandoverParams): Promise<void> {
    if (!isShuffleSlot(params) || typeof params.to?.host !== 'string' || !Number.isInteger(params.to.port)) return;
    const { id, run, slot, to } = params;
    const store = this.#options.store;
    const report = (ok: boolean, error?: string): void => this.#options.channel().notify(ShuffleMethods.handedOver, { id, run, slot, ok, error } satisfies ShuffleHandedOverParams);
    // Out of the receiver now: sent or not, these chunks are deleted (a failed handover restarts the run).
    const keys = this.receiver.handOut(id, run, outputsOfSlot(slot, params.participants, params.partitions)).flatMap((output) => output.keys);
    try {
      await this.receiver.written(keys);
      let seq = 0;
      for (const key of keys) {
        for await (const frame of chunkFrames(store, key, FRAME_BYTES)) {
          await this.#peers.request(to, { op: ADOPT_OP, id, run, slot, seq: seq++ }, frame);
          this.bytes.sent += frame.byteLength;
        }
        store.delete(key);
      }
      await this.#peers.request(to, { op: ADOPT_OP, id, run, slot, done: true });
      report(true);
    } catch (err) {
      report(false, errorMessage(err));
    } finally {
      for (const key of keys) store.delete(key);
    }
  }

  async #onAdopt(body: unknown, payload: readonly Uint8Array[] | undefined): Promise<null> {
    const b = body as Partial<ShuffleSlotParams & { seq: number; done: boolean }>;
    if (typeof b.id !== 'string' || !Number.isInteger(b.run) || !Number.isInteger(b.slot)) throw new InvalidArgumentError('a shuffle adoption needs { op, id, run, slot, seq | done }');
    if (b.done === true) {
      this.receiver.adopted(b.id, b.run as number, b.slot as number);
      return null;
    }
    if (!Number.isInteger(b.seq) || payload === undefined) throw new InvalidArgumentError('a shuffle adoption frame needs { seq } and its records as the raw payload');
    await this.receiver.adopt(b.id, b.run as number, b.slot as number, b.seq as number, payload);
    this.bytes.received += payload.reduce((sum, part) => sum + part.byteLength, 0);
    return null;
  }

  async #currentRun(meta: { id: string; partitions: number }): Promise<ShuffleRunInfo> {
    return await this.#options.channel().request<ShuffleRunInfo>(ShuffleMethods.get, { id: meta.id, partitions: meta.partitions }, 30_000);
  }

  /** Splits the input in a thread and pushes its pieces; a run that changes meanwhile (a worker lost) starts it over. */
  async #transfer(key: string, input: unknown, meta: TransferMeta, thread: Pick<ThreadSlot, 'enter' | 'leave'>, consumed: boolean): Promise<ExecutionResult> {
    this.#transfers++;
    clearTimeout(this.#sparesTimer);
    let loan: FrameLoan | undefined;
    let inputLost = false;
    try {
      const deadline = Date.now() + this.#retryMs;
      let computeSeconds = 0;
      let info = await this.#currentRun(meta);
      for (;;) {
        // Frames of a split for an older run are done with: back to the spares before this split takes some.
        loan?.end();
        if (inputLost) throw new ShufflePushError(`the input ${meta.input} of shuffle ${JSON.stringify(meta.id)} was lent to its split and not handed back: it cannot be split again for run ${info.run}`);
        await thread.enter();
        const inputBytes = sizeof(input);
        // Spares for about the frames this split fills: the rest stay for the other splits under way.
        // A frame goes in a spare only when it is at least half a frame (thread-tasks.ts), so
        // a small input fills none: spares taken for it would count as room it does not have.
        const fills = Math.min(Math.ceil(inputBytes / FRAME_BYTES) + info.workers.length, Math.floor((2 * inputBytes) / FRAME_BYTES));
        const { buffers: spares, made } = this.#frameSpares.take(fills);
        const request: SplitRequest = {
          split: meta.split,
          splitArgs: meta.splitArgs,
          partitions: meta.partitions,
          input: meta.input,
          destinations: info.workers.length,
          skip: info.done,
          frameBytes: FRAME_BYTES,
          spares,
        };
        // Room for the input's copy, the user's pieces (alive until laid out) and the frames,
        // but for the spares they take, in memory already. An input of the worker's own is
        // lent as it is (no copy; it comes back for another split), and counted like a copy:
        // the store no longer counts it.
        const own = consumed && lendableWhole(input) ? input : undefined;
        const spareBytes = (spares.length - made) * FRAME_BYTES + (own === undefined && this.#inputSpares.has(inputBytes) ? inputBytes : 0);
        const claim = await this.#room.claim(3 * inputBytes - spareBytes);
        let split: ExecutionResult;
        try {
          const copy = own === undefined ? await lendableCopy(input, this.#inputSpares) : undefined;
          const lend = own !== undefined ? [own.buffer as ArrayBuffer] : copy === undefined ? [] : [copy.buffer];
          split = await this.#options.executor.run(fn('splitForShuffle'), [own ?? copy?.value ?? input, request], { lend, share: spares });
        } finally {
          claim.release();
        }
        // Handed back, the input (or its copy) is this worker's alone again.
        let inputBack = false;
        for (const buffer of split.lent ?? []) {
          if (own !== undefined) {
            input = rebuilt(own, buffer);
            inputBack = true;
          } else this.#inputSpares.give(buffer);
        }
        // The spares the split did not fill go back now; those it filled, once their frames are pushed.
        const filled = new Set(split.ok ? (split.value as SplitResult).sparesFilled : []);
        spares.forEach((spare, i) => {
          if (!filled.has(i)) this.#frameSpares.give(spare);
        });
        // A split never keeps its input (thread-tasks.ts), so only a dead thread loses it, and
        // then the split failed. Checked all the same: another split of an empty input would
        // push wrong pieces.
        if (own !== undefined && !inputBack) inputLost = true;
        computeSeconds += split.computeSeconds;
        if (!split.ok) return split;
        const { frames, bytes, reused, allocated, sparesFilled } = split.value as SplitResult;
        // The spares made for this split are the last `made` of them: new memory, as an allocated frame is.
        const fresh = sparesFilled.filter((i) => i >= spares.length - made).length;
        this.frames.reused += reused - fresh;
        this.frames.allocated += allocated + fresh;
        for (const list of frames) for (const frame of list) if (frame.buffer instanceof SharedArrayBuffer) this.#frameSpares.adopt(frame.buffer);
        loan = new FrameLoan(this.#frameSpares, frames);
        thread.leave(); // the pushes wait on peers: the next task can use the thread
        const failure = await this.#pushAll(info, meta, loan);
        if (failure === undefined) {
          const done: ShuffleTransferredParams = { key, id: meta.id, run: info.run };
          this.#options.channel().notify(ShuffleMethods.transferred, done);
          return { ok: true, value: { run: info.run, bytes }, computeSeconds };
        }
        if (failure instanceof ShuffleDiskFullError || (failure instanceof RemoteError && failure.remoteCode === 'SPW_ERR_SHUFFLE_DISK_FULL')) {
          throw new ShuffleDiskFullError(errorMessage(failure));
        }
        // A peer failed or holds a newer run: wait for the scheduler's run to move on, then split again for it.
        for (;;) {
          if (Date.now() > deadline) throw new ShufflePushError(`pushing the pieces of input ${meta.input} of shuffle ${JSON.stringify(meta.id)} kept failing: ${errorMessage(failure)}`, { cause: failure });
          await sleep(250);
          const next = await this.#currentRun(meta);
          if (next.run !== info.run) {
            info = next;
            break;
          }
          if (failure instanceof RemoteError && failure.remoteCode === 'SPW_ERR_SHUFFLE_STALE_RUN') continue;
          // Same run, a peer that failed: maybe a passing fault; try the same frames once more now and then.
          const again = await this.#pushAll(info, meta, loan);
          if (again === undefined) {
            this.#options.channel().notify(ShuffleMethods.transferred, { key, id: meta.id, run: info.run } satisfies ShuffleTransferredParams);
            return { ok: true, value: { run: info.run, bytes }, computeSeconds };
          }
        }
      }
    } finally {
      loan?.end();
      // An input taken out of the store for this transfer is nobody else's: freed now.
      if (consumed && lendableWhole(input)) releaseBuffers([input.buffer as ArrayBuffer]);
      // The transfers are over for now (the unpacks come next, which need the memory): the spares go unless more come soon.
      if (--this.#transfers === 0) this.#sparesTimer = setTimeout(() => this.#letSparesGo(), SPARES_IDLE_MS).unref();
    }
  }

  /** Pushes every destination's frames (destinations in parallel, each in order); resolves to the first failure, if any. */
  async #pushAll(info: ShuffleRunInfo, meta: TransferMeta, loan: FrameLoan): Promise<Error | undefined> {
    const self = this.#options.self;
    const results = await Promise.allSettled(
      info.workers.map(async (address, d) => {
        const local = address.host === self.host && address.port === self.port;
        const list = loan.frames[d] ?? [];
        for (let seq = 0; seq < list.length; seq++) {
          const frame = list[seq];
          const done = loan.push(frame);
          // The receiver keeps views of a frame it takes in until their output is flushed: it says when it lets go.
          if (local) await this.receiver.accept({ id: meta.id, run: info.run, input: meta.input, seq, data: [frame], released: () => done(true) });
          else {
            try {
              await this.#peers.request(address, { op: PUSH_OP, id: meta.id, run: info.run, input: meta.input, seq }, frame);
            } catch (err) {
              done(false);
              throw err;
            }
            done(true);
            this.bytes.sent += frame.byteLength;
          }
        }
      }),
    );
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed === undefined) return undefined;
    return failed.reason instanceof Error ? failed.reason : new Error(String(failed.reason));
  }

  /** Assembles output j from the chunks this worker holds (in a thread: decoding and the user's combine). */
  async #unpack(meta: UnpackMeta, thread: Pick<ThreadSlot, 'enter' | 'leave'>): Promise<ExecutionResult> {
    // Pieces on their way from a retiring worker whose slot this one inherited come first.
    await this.receiver.whenAdopted(meta.id, meta.output, this.#retryMs);
    // Nothing held (this worker joined after the pieces were sent, or lost them): the thread reports what is missing.
    const taken = this.receiver.take(meta.id, meta.output) ?? { run: 0, keys: [] };
    const store = this.#options.store;
    try {
      await this.receiver.written(taken.keys);
      // Taken out of the store (chunk-loans.ts): the chunks are this unpack's alone.
      const { chunks, lend, bytes } = await takeChunks(store, taken.keys, this.#chunkPool);
      await thread.enter();
      const claim = await this.#room.claim(2 * bytes);
      const request: AssembleRequest = { output: meta.output, partitions: meta.partitions, inputs: meta.inputs, combine: meta.combine, combineArgs: meta.combineArgs };
      const { lent, ...result } = await this.#options.executor.run(fn('assembleOutput'), [chunks, request], { lend }).finally(() => claim.release());
      giveBack(this.#chunkPool, lent);
      return result;
    } finally {
      for (const key of taken.keys) store.delete(key);
    }
  }
}

function toErrorInfo(err: unknown): TaskErrorInfo {
  if (err instanceof Error) {
    return { name: err.name, message: err.message, stack: err.stack, code: err instanceof SpillwayError ? err.code : undefined };
  }
  return { name: 'Error', message: String(err) };
}
