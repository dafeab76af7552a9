import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { tempDir } from '../helpers/temp-dir.js';
import { checkMemoryLimitSpec, hostMemory, resolveMemoryLimit } from '../../src/worker/memory-limit.js';

const GiB = 2 ** 30;

async function fakeCgroups(t: TestContext, files: Record<string, string>): Promise<string> {
  const root = await tempDir(t, 'spillway-cgroup-');
  for (const [file, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, file)), { recursive: true });
    await writeFile(path.join(root, file), text);
  }
  return root;
}

test('cgroup v2: the tightest memory.max of the cgroup and its ancestors; "max" is no limit', async (t) => {
  const root = await fakeCgroups(t, { 'kubepods/pod1/memory.max': '2147483648\n', 'kubepods/memory.max': 'max\n', 'kubepods/pod1/c1/memory.max': 'max\n' });
  const found = await hostMemory({ cgroupRoot: root, procSelfCgroup: '0::/kubepods/pod1/c1\n', totalMemory: 16 * GiB });
  assert.deepEqual(found, { bytes: 2 * GiB, source: 'cgroup v2' });
  // Inside a container only the mount's root is visible.
  const inContainer = await fakeCgroups(t, { 'memory.max': '1073741824\n' });
  assert.deepEqual(await hostMemory({ cgroupRoot: inContainer, procSelfCgroup: '0::/\n', totalMemory: 16 * GiB }), { bytes: GiB, source: 'cgroup v2' });
});

test('cgroup v1: memory.limit_in_bytes, its "unlimited" near 2^63 ignored; no cgroup: the total memory', async (t) => {
  const root = await fakeCgroups(t, { 'memory/docker/abc/memory.limit_in_bytes': '536870912\n', 'memory/memory.limit_in_bytes': '9223372036854771712\n' });
  const cgroup = '12:cpu,cpuacct:/docker/abc\n11:memory:/docker/abc\n';
  assert.deepEqual(await hostMemory({ cgroupRoot: root, procSelfCgroup: cgroup, totalMemory: 16 * GiB }), { bytes: 512 * 2 ** 20, source: 'cgroup v1' });
  const unlimited = await fakeCgroups(t, { 'memory/memory.limit_in_bytes': '9223372036854771712\n' });
  assert.deepEqual(await hostMemory({ cgroupRoot: unlimited, procSelfCgroup: '11:memory:/\n', totalMemory: 16 * GiB }), { bytes: 16 * GiB, source: 'total memory' });
  // A limit above the machine's memory is the machine's memory.
  const big = await fakeCgroups(t, { 'memory.max': String(64 * GiB) });
  assert.equal((await hostMemory({ cgroupRoot: big, procSelfCgroup: '0::/\n', totalMemory: 16 * GiB })).bytes, 16 * GiB);
});

test("'auto', fractions and units: shared among the workers on the host", async (t) => {
  const root = await fakeCgroups(t, { 'memory.max': String(8 * GiB) });
  const host = { cgroupRoot: root, procSelfCgroup: '0::/\n', totalMemory: 32 * GiB };
  assert.equal(await resolveMemoryLimit('auto', host), 8 * GiB);
  assert.equal(await resolveMemoryLimit('auto', { ...host, workersOnHost: 4 }), 2 * GiB);
  assert.equal(await resolveMemoryLimit('0.5', host), 4 * GiB);
  assert.equal(await resolveMemoryLimit('.25', { ...host, workersOnHost: 2 }), GiB);
  assert.equal(await resolveMemoryLimit(0.5, host), 4 * GiB);
  assert.equal(await resolveMemoryLimit('4Gi', host), 4 * GiB);
  assert.equal(await resolveMemoryLimit('512Mi', host), 512 * 2 ** 20);
  assert.equal(await resolveMemoryLimit('1Ti', host), 2 ** 40);
  assert.equal(await resolveMemoryLimit(1000, host), 1000);
  for (const bad of ['0', '1.5x', 'half', '-1', '0.0', '']) {
    assert.throws(() => checkMemoryLimitSpec(bad), { code: 'SPW_ERR_INVALID_ARG' }, bad);
    await assert.rejects(resolveMemoryLimit(bad, host), { code: 'SPW_ERR_INVALID_ARG' }, bad);
  }
  await assert.rejects(resolveMemoryLimit('auto', { ...host, workersOnHost: 0 }), { code: 'SPW_ERR_INVALID_ARG' });
});
