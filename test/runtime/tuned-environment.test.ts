import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError } from '../../src/errors.js';
import { HEAP_GROWING_VARIABLE, OLD_SPACE_VARIABLE, REUSE_MIN_LIMIT, applyHeapGrowth, confineOldSpaceFloor, mallocArenas, mallocThresholds, oldSpaceFloorArguments, tunedEnvironment, v8HelperThreads, withHelperThreads, withHugePages, withSmallYoungGeneration } from '../../src/runtime/tuned-environment.js';
import { ext, nodeImports } from '../helpers/suite.js';

test('withHugePages adds glibc.malloc.hugetlb=1 and keeps what the user set', () => {
  assert.equal(withHugePages(undefined), 'glibc.malloc.hugetlb=1');
  assert.equal(withHugePages(''), 'glibc.malloc.hugetlb=1');
  assert.equal(withHugePages('glibc.malloc.tcache_count=0'), 'glibc.malloc.tcache_count=0:glibc.malloc.hugetlb=1');
  // The user's own choice wins, whether on or off, wherever it is in the list.
  assert.equal(withHugePages('glibc.malloc.hugetlb=0'), 'glibc.malloc.hugetlb=0');
  assert.equal(withHugePages('glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2'), 'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2');
  // A tunable whose name only ends like it is another tunable.
  assert.equal(withHugePages('x.glibc.malloc.hugetlb=0'), 'x.glibc.malloc.hugetlb=0:glibc.malloc.hugetlb=1');
});

test('tunedEnvironment adds the allocator settings to what the user has, and leaves the input alone', () => {
  const user = { PATH: '/bin', HOME: '/home/u' };
  const env = tunedEnvironment(user, 'linux');
  assert.deepEqual(env, {
    PATH: '/bin',
    HOME: '/home/u',
    MALLOC_MMAP_THRESHOLD_: '33554432',
    MALLOC_TRIM_THRESHOLD_: '16777216',
    MALLOC_ARENA_MAX: String(8 * os.availableParallelism()),
    GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1',
    NODE_OPTIONS: '--max-semi-space-size=2',
    SPILLWAY_HEAP_GROWING_PERCENT: '30',
  });
  assert.deepEqual(user, { PATH: '/bin', HOME: '/home/u' });
});

test("tunedEnvironment: the user's settings win", () => {
  const user = {
    MALLOC_MMAP_THRESHOLD_: '65536',
    MALLOC_TRIM_THRESHOLD_: '65536',
    MALLOC_ARENA_MAX: '8',
    GLIBC_TUNABLES: 'glibc.malloc.hugetlb=0',
    NODE_OPTIONS: '--max-semi-space-size=16',
    SPILLWAY_HEAP_GROWING_PERCENT: '100',
  };
  assert.deepEqual(tunedEnvironment(user, 'linux'), user);
});

test('tunedEnvironment sets no glibc tunables off Linux', () => {
  const env = tunedEnvironment({}, 'darwin');
  assert.equal(env.GLIBC_TUNABLES, undefined);
  assert.equal(env.MALLOC_MMAP_THRESHOLD_, '33554432');
});

test('mallocThresholds: memory returned under 1 GiB workers, reused from 1 GiB or when the limit is unknown', () => {
  const small = { mmap: 262144, trim: 524288 };
  const reuse = { mmap: 32 * 1024 * 1024, trim: 16 * 1024 * 1024 };
  assert.equal(REUSE_MIN_LIMIT, 1024 * 1024 * 1024);
  assert.deepEqual(mallocThresholds(256 * 1024 * 1024), small);
  assert.deepEqual(mallocThresholds(REUSE_MIN_LIMIT - 1), small);
  assert.deepEqual(mallocThresholds(REUSE_MIN_LIMIT), reuse);
  assert.deepEqual(mallocThresholds(16 * REUSE_MIN_LIMIT), reuse);
  assert.deepEqual(mallocThresholds(undefined), reuse);
  // tunedEnvironment takes them from the workers' memory limit; the user's own values still win.
  const shape = { workers: 2, taskThreads: 1, cores: 2 };
  const tight = tunedEnvironment({}, 'linux', { ...shape, memoryLimit: 256 * 1024 * 1024 });
  assert.equal(tight.MALLOC_MMAP_THRESHOLD_, '262144');
  assert.equal(tight.MALLOC_TRIM_THRESHOLD_, '524288');
  const large = tunedEnvironment({}, 'linux', { ...shape, memoryLimit: 2 * REUSE_MIN_LIMIT });
  assert.equal(large.MALLOC_MMAP_THRESHOLD_, '33554432');
  assert.equal(large.MALLOC_TRIM_THRESHOLD_, '16777216');
  const user = tunedEnvironment({ MALLOC_MMAP_THRESHOLD_: '65536' }, 'linux', { ...shape, memoryLimit: 2 * REUSE_MIN_LIMIT });
  assert.equal(user.MALLOC_MMAP_THRESHOLD_, '65536');
  assert.equal(user.MALLOC_TRIM_THRESHOLD_, '16777216');
});

test('mallocArenas: two under 1 GiB workers, glibc\'s eight per core from 1 GiB or when the limit is unknown', () => {
  assert.equal(mallocArenas(256 * 1024 * 1024, 2), 2);
  assert.equal(mallocArenas(REUSE_MIN_LIMIT - 1, 64), 2);
  assert.equal(mallocArenas(REUSE_MIN_LIMIT, 2), 16);
  assert.equal(mallocArenas(16 * REUSE_MIN_LIMIT, 4), 32);
  assert.equal(mallocArenas(undefined, 2), 16);
  assert.equal(mallocArenas(REUSE_MIN_LIMIT), 8 * os.availableParallelism());
  // tunedEnvironment takes them from the workers' shape; the user's own value still wins.
  const shape = { workers: 2, taskThreads: 1, cores: 2 };
  assert.equal(tunedEnvironment({}, 'linux', { ...shape, memoryLimit: 256 * 1024 * 1024 }).MALLOC_ARENA_MAX, '2');
  assert.equal(tunedEnvironment({}, 'linux', { ...shape, memoryLimit: 2 * REUSE_MIN_LIMIT }).MALLOC_ARENA_MAX, '16');
  assert.equal(tunedEnvironment({}, 'linux', { ...shape, cores: 6 }).MALLOC_ARENA_MAX, '48');
  assert.equal(tunedEnvironment({ MALLOC_ARENA_MAX: '1' }, 'linux', { ...shape, memoryLimit: 2 * REUSE_MIN_LIMIT }).MALLOC_ARENA_MAX, '1');
});

test('tunedEnvironment reads the process environment when given none', () => {
  assert.equal(tunedEnvironment().PATH, process.env.PATH);
});

test('withSmallYoungGeneration caps the semi-space and keeps the options the user set', () => {
  assert.equal(withSmallYoungGeneration(undefined), '--max-semi-space-size=2');
  assert.equal(withSmallYoungGeneration(' '), '--max-semi-space-size=2');
  assert.equal(withSmallYoungGeneration('--enable-source-maps'), '--enable-source-maps --max-semi-space-size=2');
  // The user's own size wins, however V8's flag is spelled.
  assert.equal(withSmallYoungGeneration('--import tsx --max-semi-space-size=64'), '--import tsx --max-semi-space-size=64');
  assert.equal(withSmallYoungGeneration('--max_semi_space_size 8'), '--max_semi_space_size 8');
  // A flag whose name only starts like it is another flag.
  assert.equal(withSmallYoungGeneration('--max-semi-space-sizes=1'), '--max-semi-space-sizes=1 --max-semi-space-size=2');
});

test('v8HelperThreads: the cores a worker has beside its loop and task threads, from 1 to 4', () => {
  // Two workers of one task thread on 2 cores: no core to spare, one helper each.
  assert.equal(v8HelperThreads({ workers: 2, taskThreads: 1, cores: 2 }), 1);
  assert.equal(v8HelperThreads({ workers: 1, taskThreads: 2, cores: 2 }), 1);
  assert.equal(v8HelperThreads({ workers: 2, taskThreads: 1, cores: 8 }), 2);
  assert.equal(v8HelperThreads({ workers: 1, taskThreads: 1, cores: 5 }), 3);
  // Never more than Node's own four.
  assert.equal(v8HelperThreads({ workers: 1, taskThreads: 2, cores: 64 }), 4);
  // More workers than cores.
  assert.equal(v8HelperThreads({ workers: 8, taskThreads: 1, cores: 2 }), 1);
  // The host's own cores by default.
  assert.ok(v8HelperThreads({ workers: 1, taskThreads: 1 }) >= 1);
});

test('withHelperThreads sets the pool size and keeps the one the user set', () => {
  assert.equal(withHelperThreads(undefined, 1), '--v8-pool-size=1');
  assert.equal(withHelperThreads(' ', 3), '--v8-pool-size=3');
  assert.equal(withHelperThreads('--max-semi-space-size=2', 1), '--max-semi-space-size=2 --v8-pool-size=1');
  assert.equal(withHelperThreads('--v8-pool-size=8 --enable-source-maps', 1), '--v8-pool-size=8 --enable-source-maps');
  assert.equal(withHelperThreads('--v8_pool_size 2', 1), '--v8_pool_size 2');
  assert.equal(withHelperThreads('--v8-pool-sizes=2', 1), '--v8-pool-sizes=2 --v8-pool-size=1');
});

test('tunedEnvironment sizes the helper threads for a worker shape, after the young generation', () => {
  const env = tunedEnvironment({ NODE_OPTIONS: '--enable-source-maps' }, 'linux', { workers: 2, taskThreads: 1, cores: 2 });
  assert.equal(env.NODE_OPTIONS, '--enable-source-maps --max-semi-space-size=2 --v8-pool-size=1');
  assert.equal(tunedEnvironment({ NODE_OPTIONS: '--v8-pool-size=4' }, 'linux', { workers: 2, taskThreads: 1, cores: 2 }).NODE_OPTIONS, '--v8-pool-size=4 --max-semi-space-size=2');
  // Without a shape the pool is left to Node.
  assert.equal(tunedEnvironment({}, 'linux').NODE_OPTIONS, '--max-semi-space-size=2');
});

test('applyHeapGrowth sets V8\'s heap growth from the variable, unless the process was started with its own', () => {
  assert.equal(applyHeapGrowth({}, []), undefined);
  assert.equal(applyHeapGrowth({ [HEAP_GROWING_VARIABLE]: ' ' }, []), undefined);
  // An empty value is how a user leaves V8's own growth: the supervisor keeps it as it is.
  assert.equal(tunedEnvironment({ [HEAP_GROWING_VARIABLE]: '' }, 'linux')[HEAP_GROWING_VARIABLE], '');
  assert.equal(applyHeapGrowth({ [HEAP_GROWING_VARIABLE]: '' }, []), undefined);
  for (const own of [['--heap-growing-percent=50'], ['--heap_growing_percent', '50'], ['--heap-growing-percent']]) {
    assert.equal(applyHeapGrowth({ [HEAP_GROWING_VARIABLE]: '30' }, own), undefined, own.join(' '));
  }
  // The value V8 would have chosen for this test process: it changes nothing here.
  assert.equal(applyHeapGrowth({ [HEAP_GROWING_VARIABLE]: '30' }, []), '--heap-growing-percent=30');
});

test('applyHeapGrowth refuses a value that is not a whole number of percent', () => {
  for (const value of ['abc', '0', '-5', '1.5', '30%']) {
    assert.throws(() => applyHeapGrowth({ [HEAP_GROWING_VARIABLE]: value }, []), (err: unknown) => err instanceof InvalidArgumentError && err.message.includes(HEAP_GROWING_VARIABLE), value);
  }
});

test("this Node's V8 knows the flag applyHeapGrowth sets", () => {
  // V8 ignores an unknown flag given at run time (it only prints an error): on the command
  // line an unknown one stops node, so this fails on a Node whose V8 dropped it.
  const child = spawnSync(process.execPath, ['--heap-growing-percent=30', '-e', '0'], { encoding: 'utf8' });
  assert.equal(child.status, 0, child.stderr);
  const bogus = spawnSync(process.execPath, ['--heap-growing-percentage-bogus=30', '-e', '0'], { encoding: 'utf8' });
  assert.notEqual(bogus.status, 0, 'an unknown V8 flag stops node');
});

const MiB = 2 ** 20;

test('node starts and allocates with every floor oldSpaceFloorArguments gives small memory limits', () => {
  const floors = new Set<string>();
  for (let limit = 1; limit <= 40; limit++) floors.add(oldSpaceFloorArguments({}, limit * MiB)[0]);
  for (const floor of floors) {
    const run = spawnSync(process.execPath, [floor, '-e', 'const a = []; for (let i = 0; i < 2e5; i++) a.push({ i, s: "x" + i });'], { encoding: 'utf8' });
    assert.equal(run.status, 0, `${floor}: ${run.signal ?? ''} ${run.stderr}`);
  }
});

test('oldSpaceFloorArguments: a fifth of the memory limit, at most 256 MiB, or the variable', () => {
  assert.deepEqual(oldSpaceFloorArguments({}), ['--initial-old-space-size=256']);
  assert.deepEqual(oldSpaceFloorArguments({}, 4096 * MiB), ['--initial-old-space-size=256']);
  assert.deepEqual(oldSpaceFloorArguments({}, 1280 * MiB), ['--initial-old-space-size=256']);
  assert.deepEqual(oldSpaceFloorArguments({}, 1024 * MiB), ['--initial-old-space-size=204']);
  assert.deepEqual(oldSpaceFloorArguments({}, 320 * MiB), ['--initial-old-space-size=64']);
  assert.deepEqual(oldSpaceFloorArguments({}, 256 * MiB), ['--initial-old-space-size=51']);
  assert.deepEqual(oldSpaceFloorArguments({}, 200 * MiB), ['--initial-old-space-size=40']);
  assert.deepEqual(oldSpaceFloorArguments({}, 100 * MiB), ['--initial-old-space-size=20']);
  assert.deepEqual(oldSpaceFloorArguments({}, 1 * MiB), ['--initial-old-space-size=1']);
  // A 3 MiB floor crashes node 22 and 24 as they start: it becomes 4, chosen or computed.
  assert.deepEqual(oldSpaceFloorArguments({}, 16 * MiB), ['--initial-old-space-size=4']);
  assert.deepEqual(oldSpaceFloorArguments({ [OLD_SPACE_VARIABLE]: '3' }), ['--initial-old-space-size=4']);
  // The user's value wins, whatever the limit; an empty one leaves V8's own limits.
  assert.deepEqual(oldSpaceFloorArguments({ [OLD_SPACE_VARIABLE]: '200' }, 128 * MiB), ['--initial-old-space-size=200']);
  assert.deepEqual(oldSpaceFloorArguments({ [OLD_SPACE_VARIABLE]: ' 16 ' }), ['--initial-old-space-size=16']);
  assert.deepEqual(oldSpaceFloorArguments({ [OLD_SPACE_VARIABLE]: '' }), []);
  assert.deepEqual(oldSpaceFloorArguments({ [OLD_SPACE_VARIABLE]: '  ' }, 128 * MiB), []);
});

test('oldSpaceFloorArguments refuses a value that is not a whole number of MiB', () => {
  for (const value of ['abc', '0', '-5', '1.5', '64MiB']) {
    assert.throws(() => oldSpaceFloorArguments({ [OLD_SPACE_VARIABLE]: value }), (err: unknown) => err instanceof InvalidArgumentError && err.message.includes(OLD_SPACE_VARIABLE), value);
  }
});

test('confineOldSpaceFloor resets the floor for the heaps made after it, only where the process has one', () => {
  assert.equal(confineOldSpaceFloor([]), undefined);
  assert.equal(confineOldSpaceFloor(['--max-semi-space-size=2', '--initial-old-space-sizes=3']), undefined);
  // Resetting to V8's "not set" changes nothing for this test process, which has no floor.
  assert.equal(confineOldSpaceFloor(oldSpaceFloorArguments({})), '--initial-old-space-size=0');
  assert.equal(confineOldSpaceFloor(['--initial_old_space_size', '64']), '--initial-old-space-size=0');
});

/** A script allocating buffers of 4 MiB and keeping the last eight, over about 20 MB of live heap. */
const ALLOCATING = `
  const heap = Array.from({ length: 250000 }, (_, i) => ({ i, s: 'x' + i }));
  const recent = [];
  for (let i = 0; i < 100; i++) {
    recent.push(new ArrayBuffer(4 << 20));
    if (recent.length > 8) recent.shift();
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  if (heap.length !== 250000) process.exit(3);
`;

/** The same in a worker thread, started after the process's main thread calls confineOldSpaceFloor or not. */
function inTaskThread(confine: boolean): string {
  const module = fileURLToPath(new URL(`../../src/runtime/tuned-environment${ext}`, import.meta.url));
  return `
    import { Worker } from 'node:worker_threads';
    import { confineOldSpaceFloor } from ${JSON.stringify(module)};
    if (${confine} && confineOldSpaceFloor() === undefined) process.exit(4);
    const thread = new Worker(${JSON.stringify(`(async () => { ${ALLOCATING} })()`)}, { eval: true });
    thread.on('exit', (code) => process.exit(code));
  `;
}

/**
 * The old generation's limits V8 reports as it starts each marking (`--trace-incremental-marking`),
 * in MB, for a process with a worker's young generation and heap growth running `script`.
 */
function markingLimits(extra: readonly string[], script = ALLOCATING): number[] {
  const args = [...nodeImports, withSmallYoungGeneration(undefined), '--heap-growing-percent=30', '--trace-incremental-marking', ...extra, '--input-type=module', '-e', script];
  const child = spawnSync(process.execPath, args, { encoding: 'utf8' });
  assert.equal(child.status, 0, child.stderr);
  // "v8: 20MB / 64MB / 44MB global" (size/limit/slack), or with the waste too, "v8: 20MB / 0MB / 64MB / 44MB".
  return [...child.stdout.matchAll(/Start \([^)]*\).* v8: \d+MB(?: \/ \d+MB)? \/ (\d+)MB \/ \d+MB global/g)].map((m) => Number(m[1]));
}

test("this Node's V8 applies the floor: every marking after the first sees a limit of at least 64 MB", () => {
  const floored = markingLimits(oldSpaceFloorArguments({}));
  assert.ok(floored.length >= 2, `markings: ${floored.join(', ')}`);
  // The first may start under the initial limit, before V8 has sized the heap.
  assert.ok(floored.slice(1).every((mb) => mb >= 64), `limits with the floor: ${floored.join(', ')} MB`);
  // Without it, the limit follows the live heap: the floor is what raised it.
  const own = markingLimits([]);
  assert.ok(own.length >= 2 && own.slice(1).every((mb) => mb < 64), `limits without the floor: ${own.join(', ')} MB`);
});

test("this Node's V8 keeps the floor off task threads started after confineOldSpaceFloor", () => {
  const floor = oldSpaceFloorArguments({});
  // Without the call a thread's heap gets the process's floor too: the test can tell.
  const inherited = markingLimits(floor, inTaskThread(false));
  assert.ok(inherited.length >= 2 && inherited.slice(1).every((mb) => mb >= 64), `a thread's limits with the floor inherited: ${inherited.join(', ')} MB`);
  const confined = markingLimits(floor, inTaskThread(true));
  assert.ok(confined.length >= 2 && confined.slice(1).every((mb) => mb < 64), `a thread's limits with the floor confined: ${confined.join(', ')} MB`);
});
