import assert from 'node:assert/strict';
import os from 'node:os';
import { test } from 'node:test';
import { InvalidArgumentError } from '../../src/errors.js';
import { Executor } from '../../src/worker/executor.js';
import { resolveWorkerOptions } from '../../src/worker/options.js';
import { threadNiceIncrement } from '../../src/runtime/thread-priority.js';
import { ext } from '../helpers/suite.js';

const TASKS = new URL(`./fixtures/tasks${ext}`, import.meta.url).href;
const linux = process.platform === 'linux';

async function threadPriorities(nice: number): Promise<number[]> {
  const executor = new Executor(2, { nice });
  try {
    const results = await Promise.all([0, 1].map(() => executor.run({ module: TASKS, name: 'threadPriority' }, [])));
    return results.map((r) => {
      assert.ok(r.ok, 'the task ran');
      return r.value as number;
    });
  } finally {
    await executor.close();
  }
}

test('task threads run `nice` below the event loop, which keeps its priority', { skip: !linux && 'nice is per thread on Linux only' }, async () => {
  const loop = os.getPriority();
  const expected = Math.min(19, loop + 5);
  assert.deepEqual(await threadPriorities(5), [expected, expected]);
  assert.equal(os.getPriority(), loop, "the event loop's priority is untouched");
});

test('nice 0 leaves the task threads at the priority of the event loop', async () => {
  assert.deepEqual(await threadPriorities(0), [os.getPriority(), os.getPriority()]);
});

test('threadNiceIncrement asks piscina for nothing where nice is per process, or for 0', () => {
  assert.equal(threadNiceIncrement(10, 'linux'), 10);
  assert.equal(threadNiceIncrement(10, 'darwin'), 0);
  assert.equal(threadNiceIncrement(10, 'win32'), 0);
  assert.equal(threadNiceIncrement(0, 'linux'), 0);
});

test('threadNice defaults to 10 and must be an integer from 0 to 19', () => {
  const base = { scheduler: { host: '127.0.0.1', port: 1 }, memoryLimit: '64 MiB' };
  assert.equal(resolveWorkerOptions(base).threadNice, 10);
  assert.equal(resolveWorkerOptions({ ...base, threadNice: 0 }).threadNice, 0);
  for (const bad of [-1, 20, 2.5, Number.NaN]) {
    assert.throws(() => resolveWorkerOptions({ ...base, threadNice: bad }), InvalidArgumentError, String(bad));
  }
});
