/** The event loop thread's time on a core and waiting for one, from the kernel (Linux). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loopCpuTimes } from '../../src/runtime/loop-cpu.js';

const linux = process.platform === 'linux';

test('loopCpuTimes: the main thread\'s time on a core grows with the work it does', { skip: !linux && 'Linux only' }, async () => {
  const before = await loopCpuTimes();
  assert.ok(before !== null, 'readable on Linux');
  assert.ok(before.runSeconds > 0 && before.waitSeconds >= 0, JSON.stringify(before));
  const until = performance.now() + 80;
  while (performance.now() < until) {
    // Busy on this thread, on a core or waiting for one.
  }
  const after = await loopCpuTimes();
  assert.ok(after !== null);
  const grew = after.runSeconds - before.runSeconds + (after.waitSeconds - before.waitSeconds);
  assert.ok(grew >= 0.07, `on a core or waiting for one ${grew} s of the 80 ms spent`);
  assert.ok(after.runSeconds - before.runSeconds > 0, 'the thread ran');
});

test('loopCpuTimes is null off the main thread, whose loop it does not measure', async () => {
  assert.equal(await loopCpuTimes(false), null);
});

test('loopCpuTimes is null where the system does not say', { skip: linux && 'Linux says' }, async () => {
  assert.equal(await loopCpuTimes(), null);
});
