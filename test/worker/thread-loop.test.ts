import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Executor } from '../../src/worker/executor.js';
import { waitFor } from '../helpers/wait.js';
import { ext } from '../helpers/suite.js';

const TASKS = new URL(`./fixtures/tasks${ext}`, import.meta.url).href;

test("an idle task thread's event loop runs: a timer a task set fires without another task", async () => {
  const executor = new Executor(1);
  try {
    const flag = new Int32Array(new SharedArrayBuffer(4)); // shared with the thread, not copied
    const result = await executor.run({ module: TASKS, name: 'setLater' }, [flag, 20]);
    assert.ok(result.ok);
    await waitFor(() => Atomics.load(flag, 0) === 1, 'the timer a task set to fire while the thread is idle');
  } finally {
    await executor.close();
  }
});

test("the copy of a task's large input is freed after the task, without another task", async () => {
  const executor = new Executor(1);
  const MiB = 1024 * 1024;
  try {
    await executor.run({ module: TASKS, name: 'add' }, [1, 2]); // the thread is up
    const input = new Float64Array(8 * MiB).fill(1); // 64 MiB
    const before = process.memoryUsage().arrayBuffers;
    // The copy is allocated here and moved to the thread, so this process's ArrayBuffer
    // memory counts it until the thread frees it.
    const result = await executor.run({ module: TASKS, name: 'sum' }, [input]);
    assert.ok(result.ok && result.value === input.length);
    await waitFor(() => process.memoryUsage().arrayBuffers < before + 16 * MiB, "the thread's copy of the input to be freed");
  } finally {
    await executor.close();
  }
});
