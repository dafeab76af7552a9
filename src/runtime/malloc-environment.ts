/**
 * The C library's allocator, tuned for a process whose memory is mostly large, short-lived
 * buffers (values being spilled, read back, sent to peers), and V8's young generation kept
 * small. A process cannot retune its own malloc or heap once started, so these are
 * environment variables for the processes it starts: a LocalCluster's scheduler and
 * workers, or a supervisor's children. glibc reads the malloc ones; other C libraries
 * ignore them. docs/configuration.md explains each and its trade-off.
 */

/** glibc's mmap threshold: buffers above it are mapped, and unmapped when freed. */
const MMAP_THRESHOLD = String(256 * 1024);
/** Free memory at the top of the heap above this is returned to the system. */
const TRIM_THRESHOLD = String(512 * 1024);
/** Arenas per process: task threads would otherwise each grow a heap of their own. */
const ARENA_MAX = '2';
/** V8's largest semi-space, in MiB, for every isolate of the process (its main thread and task threads). */
const SEMI_SPACE_MIB = 2;

/**
 * `userEnv` with the allocator settings Spillway's processes run best with, each only where
 * `userEnv` does not set it already (the user's setting wins):
 *
 * - a fixed mmap threshold: glibc raises its threshold each time a large block is freed,
 *   after which large buffers come from its heap and stay with the process when freed, so a
 *   worker that spills would keep its peak RSS; fixed, every buffer above it is unmapped when
 *   freed, while small pieces (a shuffle's, a transfer's) reuse heap memory;
 * - at most two malloc arenas;
 * - on Linux, glibc's transparent huge pages for malloc (`withHugePages`);
 * - V8's young generation capped (`withSmallYoungGeneration`).
 *
 * Returns a new object; `userEnv` is not changed. Reads no environment but `userEnv`.
 */
export function tunedEnvironment(userEnv: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...userEnv,
    MALLOC_MMAP_THRESHOLD_: userEnv.MALLOC_MMAP_THRESHOLD_ ?? MMAP_THRESHOLD,
    MALLOC_TRIM_THRESHOLD_: userEnv.MALLOC_TRIM_THRESHOLD_ ?? TRIM_THRESHOLD,
    MALLOC_ARENA_MAX: userEnv.MALLOC_ARENA_MAX ?? ARENA_MAX,
  };
  if (platform === 'linux') env.GLIBC_TUNABLES = withHugePages(userEnv.GLIBC_TUNABLES);
  env.NODE_OPTIONS = withSmallYoungGeneration(userEnv.NODE_OPTIONS);
  return env;
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
  const flag = `--max-semi-space-size=${SEMI_SPACE_MIB}`;
  if (nodeOptions === undefined || nodeOptions.trim() === '') return flag;
  if (/(^|\s)--max[-_]semi[-_]space[-_]size[=\s]/.test(nodeOptions)) return nodeOptions;
  return `${nodeOptions} ${flag}`;
}

/**
 * `GLIBC_TUNABLES` with glibc's transparent huge pages for malloc turned on, unless the
 * value already sets them. Every large buffer is a fresh mmap (see `tunedEnvironment`),
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
