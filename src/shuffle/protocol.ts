/**
 * The peer-to-peer shuffle's contract, shared by the client (graph nodes), the scheduler
 * (ShuffleExtension) and the workers (ShuffleService): see docs/graphs.md#shuffle and
 * docs/architecture.md#the-p2p-shuffle.
 *
 * A shuffle of P inputs into P outputs is 2P + 1 tasks, not P²:
 * - `transfer` i: splits input i on the worker holding it (user function, in a thread) and
 *   pushes each piece to the worker owning its output, batched per destination worker;
 * - `barrier`: depends on every transfer, so it is ready once every piece is stored;
 * - `unpack` j: runs on the owner of output j and assembles it from the pieces it holds.
 *
 * Pieces travel between workers as data-plane requests: `shuffle-push` (a split's frames to
 * the owner of their outputs) and `shuffle-adopt` (a retiring worker's chunks to its heir).
 */
import { type FunctionRef, type Graph, type TaskSpec, ref } from '../cluster/protocol.js';
import { InvalidArgumentError } from '../errors.js';

/** Module specifier of the shuffle's task functions, which the worker's ShuffleService runs. */
export const SHUFFLE_MODULE = 'spillway:shuffle';

export const ShuffleFunctions = {
  transfer: 'transfer',
  barrier: 'barrier',
  unpack: 'unpack',
} as const;

/** Control-plane methods, worker → scheduler. */
export const ShuffleMethods = {
  /** Request `{ id, partitions }` → ShuffleRunInfo: the current run of a shuffle (created on first ask). */
  get: 'shuffle-get',
  /** Notification `{ key, id, run }`, sent just before the transfer's task-finished: the run its pieces went to. */
  transferred: 'shuffle-transferred',
  /** Notification ShuffleHandedOverParams: a retiring worker's outputs of a slot are on its heir (or could not be). */
  handedOver: 'shuffle-handed-over',
} as const;

/** Control-plane notifications, scheduler → worker, of a retirement (docs/architecture.md#the-p2p-shuffle). */
export const ShuffleWorkerMethods = {
  /** ShuffleSlotParams: this worker inherits a slot; its unpacks wait until the pieces have come. */
  expect: 'shuffle-expect',
  /** ShuffleHandoverParams: this retiring worker sends the pieces it holds for a slot to its heir. */
  handover: 'shuffle-handover',
  /** ShuffleForgetParams: the shuffle is over (its graph released, failed or cancelled): drop what is held of it. */
  forget: 'shuffle-forget',
} as const;

/** The scheduler forgot shuffle `id`: its runs up to `run` are over on every worker. */
export interface ShuffleForgetParams {
  id: string;
  run: number;
}

/** One participant's place in a run: it owns the outputs j with `ownerIndex(j, participants) === slot`. */
export interface ShuffleSlotParams {
  id: string;
  run: number;
  slot: number;
  participants: number;
  partitions: number;
}

export interface ShuffleHandoverParams extends ShuffleSlotParams {
  /** The heir's data address. */
  to: { host: string; port: number };
}

export interface ShuffleHandedOverParams {
  id: string;
  run: number;
  slot: number;
  ok: boolean;
  error?: string;
}

/** The outputs a slot owns. */
export function outputsOfSlot(slot: number, participants: number, partitions: number): number[] {
  const out: number[] = [];
  for (let j = slot; j < partitions; j += participants) out.push(j);
  return out;
}

/** What every task of one shuffle carries. */
export interface ShuffleMeta {
  id: string;
  partitions: number;
}

export interface TransferMeta extends ShuffleMeta {
  input: number;
  split: FunctionRef;
  /** Extra arguments of `split` after the input and the partition count. */
  splitArgs: unknown[];
}

export interface UnpackMeta extends ShuffleMeta {
  output: number;
  /** Inputs of the shuffle: output j holds one piece of each. */
  inputs: number;
  /** Called with the pieces of the output in input order; absent: the output is that array. */
  combine: FunctionRef | null;
  combineArgs: unknown[];
}

/** The scheduler's answer to `shuffle-get`. */
export interface ShuffleRunInfo {
  run: number;
  /** The participants' data addresses: output j belongs to workers[j % workers.length]. */
  workers: { host: string; port: number }[];
  /** Outputs already assembled and kept: their pieces are not sent again. */
  done: number[];
}

export interface ShuffleTransferredParams {
  key: string;
  id: string;
  run: number;
}

/** Index of the worker that owns output `j` among `n` participants. */
export function ownerIndex(output: number, participants: number): number {
  return output % participants;
}

export function isShuffleFunction(fn: FunctionRef): boolean {
  return fn.module === SHUFFLE_MODULE;
}

export interface ShuffleOptions {
  /** Names this shuffle; unique among the shuffles running on the cluster at once. */
  id: string;
  /** Keys of the input partitions, in order. */
  inputs: readonly string[];
  /** Outputs (default: as many as inputs). */
  partitions?: number;
  /** `split(input, partitions, ...splitArgs)` returns an array of exactly `partitions` pieces; it runs in a thread. */
  split: FunctionRef;
  splitArgs?: unknown[];
  /** `combine(pieces, ...combineArgs)`: the output from its pieces (in input order), in a thread. Default: the array of pieces. */
  combine?: FunctionRef;
  combineArgs?: unknown[];
  /** Key of output j. Default `${id}-output-${j}`. */
  outputKey?: (j: number) => string;
}

export interface ShuffleNodes {
  /** The tasks to add to a graph. */
  graph: Graph;
  /** The output keys, output j at index j. */
  outputs: string[];
}

/** Largest partition count: output indexes travel as u32 and each output owns a store key prefix. */
export const MAX_SHUFFLE_OUTPUTS = 65_536;

/**
 * The graph nodes of a peer-to-peer shuffle: `2P + 1` tasks for P inputs and P outputs.
 * Add them to a graph (with the inputs' tasks) and want or depend on `outputs`.
 */
export function shuffle(options: ShuffleOptions): ShuffleNodes {
  const { id, inputs, split } = options;
  const P = options.partitions ?? inputs.length;
  if (typeof id !== 'string' || id.length === 0) throw new InvalidArgumentError('shuffle: id must be a non-empty string');
  if (!Array.isArray(inputs) || inputs.length === 0 || !inputs.every((k) => typeof k === 'string')) {
    throw new InvalidArgumentError('shuffle: inputs must be a non-empty array of keys');
  }
  if (!Number.isInteger(P) || P < 1 || P > MAX_SHUFFLE_OUTPUTS) throw new InvalidArgumentError(`shuffle: partitions must be an integer from 1 to ${MAX_SHUFFLE_OUTPUTS}`);
  if (inputs.length > MAX_SHUFFLE_OUTPUTS) throw new InvalidArgumentError(`shuffle: at most ${MAX_SHUFFLE_OUTPUTS} inputs`);
  checkFunctionRef(split, 'split');
  if (options.combine !== undefined) checkFunctionRef(options.combine, 'combine');
  const outputKey = options.outputKey ?? ((j: number) => `${id}-output-${j}`);
  const fn = (name: string): FunctionRef => ({ module: SHUFFLE_MODULE, name });
  const graph: Graph = {};
  const barrier = barrierKey(id);
  const transfers: ReturnType<typeof ref>[] = [];
  inputs.forEach((input, i) => {
    const key = `${id}-transfer-${i}`;
    const meta: TransferMeta = { id, partitions: P, input: i, split, splitArgs: options.splitArgs ?? [] };
    graph[key] = { fn: fn(ShuffleFunctions.transfer), args: [ref(input), meta] };
    transfers.push(ref(key));
  });
  const barrierMeta: ShuffleMeta = { id, partitions: P };
  graph[barrier] = { fn: fn(ShuffleFunctions.barrier), args: [transfers, barrierMeta] };
  const outputs: string[] = [];
  for (let j = 0; j < P; j++) {
    const key = outputKey(j);
    const meta: UnpackMeta = { id, partitions: P, output: j, inputs: inputs.length, combine: options.combine ?? null, combineArgs: options.combineArgs ?? [] };
    graph[key] = { fn: fn(ShuffleFunctions.unpack), args: [ref(barrier), meta] };
    outputs.push(key);
  }
  if (new Set(outputs).size !== P) throw new InvalidArgumentError('shuffle: outputKey must give every output its own key');
  return { graph, outputs };
}

function checkFunctionRef(fn: FunctionRef, what: string): void {
  if (typeof fn?.module !== 'string' || fn.module === '' || typeof fn.name !== 'string' || fn.name === '') {
    throw new InvalidArgumentError(`shuffle: ${what} must be { module, name } (non-empty strings)`);
  }
}

/** The barrier's key: fixed, so that the scheduler finds a shuffle's tasks from its id. */
export function barrierKey(id: string): string {
  return `${id}-barrier`;
}

/** The shuffle metadata of a task, or undefined when it is not a shuffle task. */
export function shuffleMetaOf(spec: TaskSpec): { name: string; meta: ShuffleMeta } | undefined {
  if (spec.fn.module !== SHUFFLE_MODULE) return undefined;
  const meta = spec.args?.[1] as ShuffleMeta | undefined;
  if (typeof meta !== 'object' || meta === null || typeof meta.id !== 'string' || !Number.isInteger(meta.partitions)) return undefined;
  return { name: spec.fn.name, meta };
}

/** The user functions a shuffle task names (for the client's import check). */
export function shuffleUserFunctions(spec: TaskSpec): FunctionRef[] {
  const found = shuffleMetaOf(spec);
  if (found === undefined) return [];
  const meta = found.meta as Partial<TransferMeta & UnpackMeta>;
  const out: FunctionRef[] = [];
  if (found.name === ShuffleFunctions.transfer && meta.split !== undefined) out.push(meta.split);
  if (found.name === ShuffleFunctions.unpack && meta.combine !== undefined && meta.combine !== null) out.push(meta.combine);
  return out;
}

/** The body of a data-plane request that pushes pieces. */
export const PUSH_OP = 'shuffle-push';

/** The body of a data-plane request that hands a retiring worker's pieces to its heir. */
export const ADOPT_OP = 'shuffle-adopt';

/** Whether `p` names a slot of a shuffle run (its owner's outputs), as the scheduler sends it. */
export function isShuffleSlot(p: Partial<ShuffleSlotParams> | null | undefined): p is ShuffleSlotParams {
  return typeof p?.id === 'string' && [p.run, p.slot, p.participants, p.partitions].every((n) => Number.isInteger(n) && (n as number) >= 0) && (p.participants as number) > 0;
}

/** One frame of a split's pieces for one worker, as a `shuffle-push` request carries it. */
export interface ShufflePush {
  id: string;
  run: number;
  input: number;
  /** Index of this frame among the input's frames to this worker (with the input, it makes pushes idempotent). */
  seq: number;
  /** Records (records.ts): one buffer, or the socket reads a peer's push arrived in. */
  data: readonly Uint8Array[];
}

/** The push a data-plane request carries, its records as the raw payload; throws on anything else. */
export function parsePush(body: unknown, payload: readonly Uint8Array[] | undefined): ShufflePush {
  const b = body as Partial<Omit<ShufflePush, 'data'> & { op: string }> | null;
  if (
    typeof b !== 'object' ||
    b === null ||
    b.op !== PUSH_OP ||
    typeof b.id !== 'string' ||
    !Number.isInteger(b.run) ||
    !Number.isInteger(b.input) ||
    !Number.isInteger(b.seq) ||
    payload === undefined
  ) {
    throw new InvalidArgumentError('a shuffle push needs { op, id, run, input, seq } and its records as the raw payload');
  }
  return { id: b.id, run: b.run as number, input: b.input as number, seq: b.seq as number, data: payload };
}
