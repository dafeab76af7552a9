/** The settings LocalCluster gives its workers (option tuneMalloc): huge pages for large buffers on Linux, V8's young generation and helper threads. */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import { LocalCluster } from '../../src/client/local-cluster.js';
import { Supervisor } from '../../src/client/supervisor.js';
import { InvalidArgumentError } from '../../src/errors.js';
import type { Graph } from '../../src/cluster/protocol.js';
import { OLD_SPACE_VARIABLE, v8HelperThreads, withHelperThreads, withHugePages, withSmallYoungGeneration } from '../../src/runtime/tuned-environment.js';
import { fixture, MiB, startCluster } from './helpers.js';
import { commandLine, environment } from '../helpers/proc.js';

/** The kernel's transparent huge page mode ('always', 'madvise' or 'never'), or undefined without THP. */
async function thpMode(): Promise<string | undefined> {
  const text = await readFile('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8').catch(() => undefined);
  return text?.match(/\[(\w+)\]/)?.[1];
}

/** Bytes of anonymous memory a process has on huge pages now. */
async function anonHugeBytes(pid: number): Promise<number> {
  const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = text.match(/^AnonHugePages:\s+(\d+) kB/m);
  return kb === null ? 0 : Number(kb[1]) * 1024;
}

test('workers run with huge pages for malloc, and a worker holding large values has memory on them', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  if (process.env.GLIBC_TUNABLES !== undefined) t.diagnostic(`this process has GLIBC_TUNABLES=${process.env.GLIBC_TUNABLES}`);
  const cluster = await startCluster(t, { workers: 1, memoryLimit: '512 MiB' });
  const pid = cluster.workers[0];
  const env = await environment(pid);
  assert.equal(env.get('GLIBC_TUNABLES'), withHugePages(process.env.GLIBC_TUNABLES));
  // A worker under 1 GiB has every large buffer mapped, and unmapped when freed (mallocThresholds).
  assert.equal(env.get('MALLOC_MMAP_THRESHOLD_'), process.env.MALLOC_MMAP_THRESHOLD_ ?? '262144');
  assert.equal(env.get('MALLOC_TRIM_THRESHOLD_'), process.env.MALLOC_TRIM_THRESHOLD_ ?? '524288');
  assert.equal(env.get('MALLOC_ARENA_MAX'), process.env.MALLOC_ARENA_MAX ?? '2');
  // One worker with the cluster's default task threads, all the host's cores.
  const helpers = v8HelperThreads({ workers: 1, taskThreads: os.availableParallelism() });
  assert.equal(env.get('NODE_OPTIONS'), withHelperThreads(withSmallYoungGeneration(process.env.NODE_OPTIONS), helpers));
  assert.equal(env.get('SPILLWAY_HEAP_GROWING_PERCENT'), process.env.SPILLWAY_HEAP_GROWING_PERCENT ?? '30');
  // V8 reads the old generation's floor only as it starts: node's own argument, before the script.
  const args = await commandLine(pid);
  const script = args.findIndex((arg) => /main\.[jt]s$/.test(arg));
  const floor = args.indexOf('--initial-old-space-size=102');
  if (process.env[OLD_SPACE_VARIABLE] === undefined) assert.ok(floor > 0 && floor < script, args.join(' '));

  // Whether glibc applies it depends on the kernel (THP not 'never') and glibc >= 2.35.
  const mode = await thpMode();
  const glibc = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header?.glibcVersionRuntime;
  const [major, minor] = (glibc ?? '0.0').split('.').map(Number);
  const applies = (mode === 'always' || mode === 'madvise') && (major > 2 || (major === 2 && minor >= 35)) && /(^|:)glibc\.malloc\.hugetlb=1/.test(env.get('GLIBC_TUNABLES') ?? '');
  if (!applies) {
    t.skip(`huge pages not checked: THP ${mode ?? 'absent'}, glibc ${glibc ?? 'not glibc'}`);
    return;
  }
  const client = await Client.connect(cluster.address, { token: cluster.token });
  t.after(() => client.close());
  // Four values of 16 MiB kept on the worker, resident (a 512 MiB limit: with 256 MiB it
  // spilled them): each is one malloc'd ArrayBuffer, an mmap glibc advises for huge pages.
  const graph: Graph = {};
  for (let i = 0; i < 4; i++) graph[`big-${i}`] = { fn: fixture('fill'), args: [(16 * MiB) / 8, i] };
  const values = await client.compute<Float64Array>(graph, Object.keys(graph), { keep: true });
  assert.deepEqual(
    values.map((v) => [v.length, v[0]]),
    [0, 1, 2, 3].map((i) => [(16 * MiB) / 8, i]),
  );
  const huge = await anonHugeBytes(pid);
  // Measured 72-74 MiB (the values and other large buffers); a process without the tunable has 0.
  assert.ok(huge >= 48 * MiB, `the worker has ${huge} bytes on huge pages`);
});

test('tuneMalloc: false starts the processes with this process environment as it is', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  const cluster = await startCluster(t, { workers: 1, tuneMalloc: false });
  const env = await environment(cluster.workers[0]);
  for (const name of ['MALLOC_MMAP_THRESHOLD_', 'MALLOC_TRIM_THRESHOLD_', 'MALLOC_ARENA_MAX', 'GLIBC_TUNABLES', 'NODE_OPTIONS']) {
    assert.equal(env.get(name), process.env[name], name);
  }
  const args = await commandLine(cluster.workers[0]);
  assert.ok(!args.some((arg) => arg.startsWith('--initial-old-space-size')), args.join(' '));
});

test('tuneMalloc must be a boolean', async () => {
  await assert.rejects(LocalCluster.start({ tuneMalloc: 'yes' as unknown as boolean }), InvalidArgumentError);
});

test("the supervisor's taskThreads must be a positive integer (checked before any worker starts)", () => {
  for (const taskThreads of [0, 1.5, -1]) {
    assert.throws(() => new Supervisor({ count: 1, args: () => [], taskThreads }), InvalidArgumentError, String(taskThreads));
  }
});

test('a worker of a small memory limit gets a fifth of it as its floor; SPILLWAY_INITIAL_OLD_SPACE_MIB wins, empty turns it off', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  const floorOf = async (pid: number): Promise<string | undefined> => (await commandLine(pid)).find((arg) => arg.startsWith('--initial-old-space-size'));
  const supervisors: Supervisor[] = [];
  t.after(() => Promise.all(supervisors.map((s) => s.stop(1_000))));
  // Workers that never register (no scheduler): only their command lines are read.
  const cases: [NodeJS.ProcessEnv, number, string | undefined][] = [
    [{ [OLD_SPACE_VARIABLE]: undefined }, 96 * MiB, '--initial-old-space-size=19'],
    [{ [OLD_SPACE_VARIABLE]: '100' }, 96 * MiB, '--initial-old-space-size=100'],
    [{ [OLD_SPACE_VARIABLE]: '' }, 96 * MiB, undefined],
  ];
  for (const [env, memoryLimit, expected] of cases) {
    const supervisor = new Supervisor({ count: 1, args: () => ['--scheduler', '127.0.0.1:9', '--memory-limit', String(memoryLimit)], env, memoryLimit, restart: false, stderr: 'pipe' });
    supervisors.push(supervisor);
    assert.equal(await floorOf(supervisor.workers[0].pid), expected, JSON.stringify(env));
  }
});

test('a supervisor refuses a floor that is not a whole number of MiB before it starts any worker', () => {
  assert.throws(() => new Supervisor({ count: 1, args: () => [], env: { [OLD_SPACE_VARIABLE]: '64MiB' } }), (err: unknown) => err instanceof InvalidArgumentError && err.message.includes(OLD_SPACE_VARIABLE));
});
