import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type ComputeTaskParams, Methods, type TaskFinishedParams } from '../../src/cluster/protocol.js';
import type { Channel } from '../../src/control/channel.js';
import { ControlServer } from '../../src/control/server.js';
import { Worker } from '../../src/worker/index.js';
import { fn } from './helpers.js';

test('a compute-task read together with the registration answer is run, not lost', async (t) => {
  const server = await ControlServer.listen();
  t.after(() => server.close());
  const finished: TaskFinishedParams[] = [];
  server.on('channel', (channel: Channel) => {
    channel.handle(Methods.heartbeat, () => undefined);
    channel.handle(Methods.taskFinished, (p) => void finished.push(p as TaskFinishedParams));
    channel.handle(Methods.registerWorker, () => {
      // Sent just after the answer (another event of the scheduler's, a loop turn later).
      setImmediate(() => {
        const params: ComputeTaskParams = { key: 'first', spec: fn('add', 1, 2), deps: {}, priority: 0 };
        channel.notify(Methods.computeTask, params);
      });
      return { workerId: 'w0', heartbeatIntervalMs: 1000 };
    });
  });
  const worker = await Worker.start({ scheduler: server.address, memoryLimit: '64 MiB', nthreads: 1, monitorInterval: false });
  t.after(() => worker.close());
  const deadline = Date.now() + 3000;
  while (finished.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(
    finished.map((f) => f.key),
    ['first'],
    `the task was lost (queued ${worker.queued}, executing ${worker.executing})`,
  );
});
