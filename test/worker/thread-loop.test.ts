import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { Executor } from '../../src/worker/executor.js';

const TASKS = new URL('./fixtures/tasks.ts', import.meta.url).href;

/** Polls `done` every 10 ms for up to `ms`; true once it holds. */
async function eventually(done: () => boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(10)) if (done()) return true;
  return done();
}

test("an idle task thread's event loop runs: a timer a task set fires without another task", async () => {
  const executor = new Executor(1);
  try {
    const flag = new Int32Array(new SharedArrayBuffer(4)); // shared with the thread, not copied
    const result = await executor.run({ module: TASKS, name: 'setLater' }, [flag, 20]);
    assert.ok(result.ok);
    assert.ok(await eventually(() => Atomics.load(flag, 0) === 1, 5000), 'the timer fired while the thread was idle');
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
    const freed = await eventually(() => process.memoryUsage().arrayBuffers < before + 16 * MiB, 5000);
    assert.ok(freed, `ArrayBuffers ${(process.memoryUsage().arrayBuffers - before) / MiB} MiB above the level before the task`);
  } finally {
    await executor.close();
  }
});
