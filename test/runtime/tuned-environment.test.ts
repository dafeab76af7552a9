import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tunedEnvironment, v8HelperThreads, withHelperThreads, withHugePages, withSmallYoungGeneration } from '../../src/runtime/tuned-environment.js';

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
    MALLOC_MMAP_THRESHOLD_: '262144',
    MALLOC_TRIM_THRESHOLD_: '524288',
    MALLOC_ARENA_MAX: '2',
    GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1',
    NODE_OPTIONS: '--max-semi-space-size=2',
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
  };
  assert.deepEqual(tunedEnvironment(user, 'linux'), user);
});

test('tunedEnvironment sets no glibc tunables off Linux', () => {
  const env = tunedEnvironment({}, 'darwin');
  assert.equal(env.GLIBC_TUNABLES, undefined);
  assert.equal(env.MALLOC_MMAP_THRESHOLD_, '262144');
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
