/**
 * The C library's allocator, tuned for a process whose memory is mostly large, short-lived
 * buffers (values being spilled, read back, sent to peers), V8's young generation kept
 * small, its heap kept near what it holds, and V8's helper threads sized to the worker's
 * share of the cores. A process cannot retune its own malloc once started, nor take most V8
 * flags in NODE_OPTIONS, so these are environment variables for the processes it starts: a
 * supervisor's workers (LocalCluster's too). glibc reads the malloc ones; other C libraries
 * ignore them; the heap's growth, which NODE_OPTIONS may not carry, has a variable of its
 * own that the worker applies to itself (`applyHeapGrowth`), and the floor under the old
 * generation's limit, which V8 reads as it makes each heap, goes on the worker's command line
 * (`oldSpaceFloorArguments`) and is kept to its main thread (`confineOldSpaceFloor`).
 * docs/configuration.md explains each and its trade-off.
 */
import { availableParallelism } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { InvalidArgumentError } from '../errors.js';

/**
 * glibc's mmap threshold and trim threshold for a worker whose memory limit is under
 * REUSE_MIN_LIMIT: buffers above 256 KiB are mapped, and unmapped when freed; free memory
 * at the top of the heap past 512 KiB goes back to the system.
 */
const RETURN_THRESHOLDS = { mmap: 256 * 1024, trim: 512 * 1024 };
/**
 * The same for a worker of REUSE_MIN_LIMIT or more: the largest mmap threshold glibc
 * takes on 64-bit systems (half the size of its heaps), so buffers up to it come from its
 * heap and their memory is reused when freed; a trim threshold that lets the top of a heap
 * go back only once a few such buffers' worth is free there.
 */
const REUSE_THRESHOLDS = { mmap: 32 * 1024 * 1024, trim: 16 * 1024 * 1024 };
/** The memory limit from which a worker's malloc keeps freed memory for reuse. */
export const REUSE_MIN_LIMIT = 1024 * 1024 * 1024;
/** Arenas of a worker under REUSE_MIN_LIMIT (`mallocArenas`). */
const SMALL_WORKER_ARENAS = 2;
/** Arenas per core from REUSE_MIN_LIMIT: glibc's own default on 64-bit systems. */
const ARENAS_PER_CORE = 8;
/** V8's largest semi-space, in MiB, for every isolate of the process (its main thread and task threads). */
const SEMI_SPACE_MIB = 2;
/** How far V8 lets a worker's heap grow past what its last full collection kept, in percent. */
const HEAP_GROWING_PERCENT = '30';
/** The variable that carries it to the worker, which applies it to itself (`applyHeapGrowth`). */
export const HEAP_GROWING_VARIABLE = 'SPILLWAY_HEAP_GROWING_PERCENT';
/** The variable that sets the floor of a worker's old-generation limit, in MiB (`oldSpaceFloorArguments`). */
export const OLD_SPACE_VARIABLE = 'SPILLWAY_INITIAL_OLD_SPACE_MIB';
/** That floor's default, in MiB, and the share of the worker's memory limit it stays within. */
const OLD_SPACE_MIB = 256;
const OLD_SPACE_SHARE = 1 / 5;
/** A floor V8 cannot start with: node 22 and 24 crash (SIGSEGV) with it, so it is raised by one. */
const CRASHING_FLOOR_MIB = 3;
/** The flag that carries the floor, as node and `setFlagsFromString` spell it. */
const OLD_SPACE_FLAG = 'initial-old-space-size';
/** Node's own number of V8 helper threads, the most a worker is given. */
const NODE_HELPER_THREADS = 4;

/** The workers a supervisor starts on one host, which share its cores. */
export interface WorkerShape {
  /** Worker processes on the host. */
  workers: number;
  /** Task threads of each worker (its `nthreads`). */
  taskThreads: number;
  /** The host's cores; default `os.availableParallelism()`. */
  cores?: number;
  /** Each worker's memory limit in bytes, where known (`mallocThresholds`). */
  memoryLimit?: number;
}

/**
 * `userEnv` with the allocator settings Spillway's processes run best with, each only where
 * `userEnv` does not set it already (the user's setting wins):
 *
 * - fixed mmap and trim thresholds, chosen by the worker's memory limit (`mallocThresholds`);
 * - malloc's arenas, two or one per thread by that limit (`mallocArenas`);
 * - on Linux, glibc's transparent huge pages for malloc (`withHugePages`);
 * - V8's young generation capped (`withSmallYoungGeneration`);
 * - V8's heap kept close to what it holds (`HEAP_GROWING_VARIABLE`, `applyHeapGrowth`);
 * - with `shape`, V8's helper threads sized to each worker's share of the cores
 *   (`v8HelperThreads`, `withHelperThreads`).
 *
 * Returns a new object; `userEnv` is not changed. Reads no environment but `userEnv`.
 */
export function tunedEnvironment(userEnv: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform, shape?: WorkerShape): NodeJS.ProcessEnv {
  const thresholds = mallocThresholds(shape?.memoryLimit);
  const env: NodeJS.ProcessEnv = {
    ...userEnv,
    MALLOC_MMAP_THRESHOLD_: userEnv.MALLOC_MMAP_THRESHOLD_ ?? String(thresholds.mmap),
    MALLOC_TRIM_THRESHOLD_: userEnv.MALLOC_TRIM_THRESHOLD_ ?? String(thresholds.trim),
    MALLOC_ARENA_MAX: userEnv.MALLOC_ARENA_MAX ?? String(mallocArenas(shape?.memoryLimit, shape?.cores)),
  };
  env[HEAP_GROWING_VARIABLE] = userEnv[HEAP_GROWING_VARIABLE] ?? HEAP_GROWING_PERCENT;
  if (platform === 'linux') env.GLIBC_TUNABLES = withHugePages(userEnv.GLIBC_TUNABLES);
  env.NODE_OPTIONS = withSmallYoungGeneration(userEnv.NODE_OPTIONS);
  if (shape !== undefined) env.NODE_OPTIONS = withHelperThreads(env.NODE_OPTIONS, v8HelperThreads(shape));
  return env;
}

/**
 * glibc's mmap and trim thresholds, in bytes, for a worker with `memoryLimit` (unknown:
 * as for a large one). Both are fixed: left to itself, glibc raises its mmap threshold
 * each time a large block is freed, and where that leaves it depends on the run.
 *
 * - Under REUSE_MIN_LIMIT (RETURN_THRESHOLDS) every buffer past a small threshold is
 *   mapped and unmapped when freed, so RSS follows what the store holds. A small worker's
 *   values are a large share of its limit, and memory kept for reuse would leave the store
 *   less room: it spills more and waits for RSS to fall, and gains nothing.
 * - From REUSE_MIN_LIMIT (REUSE_THRESHOLDS), buffers up to glibc's largest threshold reuse
 *   the heap's memory. A worker makes and frees buffers of MiB without pause (task
 *   results, the threads' copies of inputs, reads, frames), and memory fresh from the
 *   kernel costs a page fault at the first write to each page: on a virtual machine, where
 *   a fault is slow, writing fresh memory takes many times as long as writing reused
 *   memory, and the faults are much of a worker's CPU. What the heap keeps is a small
 *   share of a large limit.
 *
 * Buffers under the small threshold (a shuffle's pieces at small partitions) come from the
 * heap either way.
 */
export function mallocThresholds(memoryLimit?: number): { mmap: number; trim: number } {
  return returnsMemory(memoryLimit) ? { ...RETURN_THRESHOLDS } : { ...REUSE_THRESHOLDS };
}

/**
 * glibc's most malloc arenas (`MALLOC_ARENA_MAX`) for a worker with `memoryLimit` (unknown:
 * as for a large one) on a host of `cores`.
 *
 * - Under REUSE_MIN_LIMIT, two: buffers past the small mmap threshold are mapped outside
 *   the arenas, so an arena's lock is held briefly, and each further arena would keep free
 *   memory of its own that a small worker cannot spare.
 * - From REUSE_MIN_LIMIT, glibc's own default, enough for an arena per thread: buffers up
 *   to REUSE_THRESHOLDS' mmap threshold come from the arenas' heaps, and a thread that
 *   grows or trims a heap holds its arena's lock through the system calls. Threads that
 *   share an arena wait on each other there, and when the holder is itself waiting for a
 *   core, the loop sharing its arena sleeps past its timers: with two arenas the loop
 *   shares one with some of the other threads (the libuv pool's, V8's helpers, the task
 *   threads). With one each, the loop's arena is its own (docs/benchmarks.md, Cluster).
 */
export function mallocArenas(memoryLimit?: number, cores: number = availableParallelism()): number {
  return returnsMemory(memoryLimit) ? SMALL_WORKER_ARENAS : ARENAS_PER_CORE * cores;
}

/**
 * Whether a worker hands freed buffers back to the kernel: under REUSE_MIN_LIMIT (an
 * unknown limit counts as a large one).
 */
function returnsMemory(memoryLimit: number | undefined): boolean {
  return memoryLimit !== undefined && memoryLimit < REUSE_MIN_LIMIT;
}

/**
 * V8's helper threads for each worker: the cores its share of the host leaves beside its
 * loop and its task threads, at least 1 and at most Node's own 4. The helpers mark and
 * sweep for every isolate of the process concurrently, at the loop's priority, while task
 * threads run below it (`threadNice`); where the cores are already taken, four helpers per
 * worker crowd the loops out of them, and a loop's delays grow with the run queue. One
 * helper per worker on a host whose cores are all taken shortens the loops' long delays
 * without slowing the work (docs/benchmarks.md, Cluster).
 */
export function v8HelperThreads(shape: WorkerShape): number {
  const cores = shape.cores ?? availableParallelism();
  const spare = Math.floor(cores / Math.max(1, shape.workers)) - 1 - shape.taskThreads;
  return Math.min(NODE_HELPER_THREADS, Math.max(1, spare));
}

/** `NODE_OPTIONS` with `--v8-pool-size=threads`, unless the user sets the pool's size. */
export function withHelperThreads(nodeOptions: string | undefined, threads: number): string {
  return withNodeFlag(nodeOptions, 'v8-pool-size', threads);
}

/**
 * `NODE_OPTIONS` with V8's semi-space capped at SEMI_SPACE_MIB, unless the user sets it. A
 * worker allocates many small objects that live a little while (a shuffle's records until
 * their chunk is made): V8 then grows each isolate's young generation to its default
 * largest, which stays resident, memory the store cannot spill but its RSS checks count,
 * so room-making spills the values in use instead. Smaller semi-spaces cost more
 * frequent, shorter scavenges.
 */
export function withSmallYoungGeneration(nodeOptions: string | undefined): string {
  return withNodeFlag(nodeOptions, 'max-semi-space-size', SEMI_SPACE_MIB);
}

/** `nodeOptions` with `--name=value` added, unless they set the flag already (with dashes or underscores, `=` or a space). */
function withNodeFlag(nodeOptions: string | undefined, name: string, value: number): string {
  const flag = `--${name}=${value}`;
  if (nodeOptions === undefined || nodeOptions.trim() === '') return flag;
  return startedWithFlag(nodeOptions.trim().split(/\s+/), name) ? nodeOptions : `${nodeOptions} ${flag}`;
}

/** Whether node's arguments (`execArgv`, or NODE_OPTIONS split at spaces) set V8 flag `--name` (with dashes or underscores, `=value` or the value apart). */
function startedWithFlag(args: readonly string[], name: string): boolean {
  const spelled = new RegExp(`^--${name.replaceAll('-', '[-_]')}(=|$)`);
  return args.some((arg) => spelled.test(arg));
}

/**
 * Applies `SPILLWAY_HEAP_GROWING_PERCENT` (set by the supervisor, `tunedEnvironment`) to this
 * process's V8 as `--heap-growing-percent`, unless the process was started with that flag;
 * returns the flag applied, if any. NODE_OPTIONS may not carry it, so the worker sets it on
 * itself as it starts; V8 reads it at each full collection, for every isolate.
 *
 * Why: V8 lets a heap grow to a multiple of what its last full collection kept, up to
 * four times it when its collections are quick. A worker's live heap is small (tens of MiB:
 * the store's index, a shuffle's chunk keys), and where few buffers start collections the
 * heap fills with garbage to several times that, past the worker's memory limit: memory
 * the store can neither spill nor count on. Kept within 30 % of it, the heap stays near
 * its live size at the cost of more frequent, small markings. An empty value leaves V8's
 * own growth.
 */
export function applyHeapGrowth(env: NodeJS.ProcessEnv = process.env, execArgv: readonly string[] = process.execArgv): string | undefined {
  const percent = wholeNumberSetting(env, HEAP_GROWING_VARIABLE, 'percent');
  if (typeof percent !== 'number') return undefined;
  if (startedWithFlag(execArgv, 'heap-growing-percent')) return undefined;
  const flag = `--heap-growing-percent=${percent}`;
  setFlagsFromString(flag);
  return flag;
}

/**
 * The node arguments that put a floor under V8's old-generation limit for a worker
 * (`--initial-old-space-size`): `SPILLWAY_INITIAL_OLD_SPACE_MIB` from `env` where set (an
 * empty value: none, V8's own limits), else OLD_SPACE_MIB, or OLD_SPACE_SHARE of
 * `memoryLimit` when that is less; CRASHING_FLOOR_MIB, either way, is raised by one.
 * NODE_OPTIONS may not carry this flag, and V8 reads it only when it makes a heap, so the
 * supervisor puts it on the worker's command line; the worker keeps it to its main thread
 * (`confineOldSpaceFloor`).
 *
 * Why: V8 counts how far the ArrayBuffer memory has risen since its last full collection
 * (above the lowest it has been since) as part of the old generation when it decides to
 * start the next one, and without a floor the limit is the small live heap plus a step. A
 * worker's values are buffers of megabytes coming and going (a task's result, a chunk, a
 * read-back), so nearly every one would start a full marking on the loop's core. A floor
 * lets that memory swing between markings. The higher it is, the longer garbage sits in
 * RSS before a marking frees it (or the store, once RSS passes its target, collects), so
 * it stays within a fifth of the memory limit, low enough that a heap grown toward the
 * floor by many small pieces still leaves the worker under its limit. It is capped
 * (OLD_SPACE_MIB) because V8 also starts a marking each time the ArrayBuffer memory rises
 * a fixed step above its lowest since the last one, whatever the floor: a floor past the
 * live heap plus that step saves no more markings and only lets garbage sit longer.
 */
export function oldSpaceFloorArguments(env: NodeJS.ProcessEnv = process.env, memoryLimit?: number): string[] {
  const setting = wholeNumberSetting(env, OLD_SPACE_VARIABLE, 'MiB');
  if (setting === 'off') return [];
  const share = memoryLimit === undefined ? Infinity : Math.floor((memoryLimit * OLD_SPACE_SHARE) / 2 ** 20);
  const mib = setting ?? Math.max(1, Math.min(OLD_SPACE_MIB, share));
  return [`--${OLD_SPACE_FLAG}=${mib === CRASHING_FLOOR_MIB ? mib + 1 : mib}`];
}

/**
 * Keeps the floor `oldSpaceFloorArguments` put on this process's command line to the heap
 * it was meant for, the main thread's: V8 reads the flag again for every isolate it makes,
 * so the process's task threads (worker_threads, started after this call) get V8's own
 * limits instead. Returns the flag applied, or undefined when the process was started
 * without a floor. Call it before the first task thread starts.
 *
 * Why: the floor pays on the main thread, whose markings the values' arrivals start. A
 * task thread's garbage is what its tasks made and dropped (a split's pieces, copies of
 * inputs): with the floor each thread would hold up to the floor's worth of it beside the
 * worker's values, memory the store can neither spill nor count on, and with thousands of
 * small pieces per task that takes a worker past its memory limit.
 */
export function confineOldSpaceFloor(execArgv: readonly string[] = process.execArgv): string | undefined {
  if (!startedWithFlag(execArgv, OLD_SPACE_FLAG)) return undefined;
  // 0 is V8's "not set": the heaps made from now on size their old generation themselves.
  const flag = `--${OLD_SPACE_FLAG}=0`;
  setFlagsFromString(flag);
  return flag;
}

/**
 * The whole number of `unit` (1 or more) that variable `name` of `env` sets: undefined when
 * unset, 'off' when empty (the user turns the tuning off); anything else is refused.
 */
function wholeNumberSetting(env: NodeJS.ProcessEnv, name: string, unit: string): number | 'off' | undefined {
  const value = env[name];
  if (value === undefined) return undefined;
  if (value.trim() === '') return 'off';
  if (!/^\d+$/.test(value.trim()) || Number(value) < 1) {
    throw new InvalidArgumentError(`${name} must be a whole number of ${unit}, 1 or more, got ${JSON.stringify(value)}`);
  }
  return Number(value);
}

/**
 * `GLIBC_TUNABLES` with glibc's transparent huge pages for malloc turned on, unless the
 * value already sets them. Every buffer above the mmap threshold is a fresh mmap (`mallocThresholds`),
 * first touched one 4 KiB page fault at a time; on a kernel whose huge pages are opt-in
 * (`madvise`, the common default) this opts those of 2 MiB or more in, 512 pages per
 * fault. glibc before 2.35 ignores it; a user who sets `glibc.malloc.hugetlb` (0 turns it
 * off) keeps their value.
 */
export function withHugePages(tunables: string | undefined): string {
  if (tunables === undefined || tunables.trim() === '') return 'glibc.malloc.hugetlb=1';
  if (/(^|:)\s*glibc\.malloc\.hugetlb=/.test(tunables)) return tunables;
  return `${tunables}:glibc.malloc.hugetlb=1`;
}
