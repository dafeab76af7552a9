/**
 * A retiring participant's shuffle handover that fails, on the scheduler with fake workers
 * that play the shuffle's protocol (no data moves): the shuffle restarts at once, without
 * the retiring worker, and completes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Methods, type Graph, type TaskErrorInfo } from '../../src/cluster/protocol.js';
import {
  type ShuffleForgetParams,
  type ShuffleHandoverParams,
  type ShuffleRunInfo,
  type ShuffleSlotParams,
  ShuffleFunctions,
  ShuffleMethods,
  ShuffleWorkerMethods,
  shuffle,
} from '../../src/shuffle/protocol.js';
import { waitFor } from '../helpers/wait.js';
import { FakeClient, FakeWorker, startScheduler, task } from './helpers.js';

const SPLIT = { module: 'file:///fake/module.js', name: 'split' };

/** What a fake worker was told of shuffles. */
interface Heard {
  expect: ShuffleSlotParams[];
  handover: ShuffleHandoverParams[];
  forget: ShuffleForgetParams[];
}

function listen(worker: FakeWorker): Heard {
  const heard: Heard = { expect: [], handover: [], forget: [] };
  worker.channel.handle(ShuffleWorkerMethods.expect, (p) => void heard.expect.push(p as ShuffleSlotParams));
  worker.channel.handle(ShuffleWorkerMethods.handover, (p) => void heard.handover.push(p as ShuffleHandoverParams));
  worker.channel.handle(ShuffleWorkerMethods.forget, (p) => {
    heard.forget.push(p as ShuffleForgetParams);
    // As the ShuffleService does: an unpack waiting for pieces of a forgotten run finds them incomplete.
    for (const key of [...worker.inFlight.keys()].filter((k) => k.includes('-output-'))) {
      worker.inFlight.delete(key);
      const error: TaskErrorInfo = { name: 'ShuffleIncompleteError', message: 'pieces missing', code: 'SPW_ERR_SHUFFLE_INCOMPLETE' };
      worker.channel.notify(Methods.taskErred, { workerId: worker.id, key, error });
    }
  });
  return heard;
}

/** Runs every task sent to `worker` (but those `skip` names) as the ShuffleService would: a transfer asks for the run and says where its pieces went. */
async function runSent(worker: FakeWorker, skip: (key: string) => boolean = () => false): Promise<void> {
  for (const [key, params] of [...worker.inFlight]) {
    if (skip(key)) continue;
    if (params.spec.fn.name === ShuffleFunctions.transfer) {
      const info = await worker.channel.request<ShuffleRunInfo>(ShuffleMethods.get, { id: 's', partitions: 2 });
      worker.channel.notify(ShuffleMethods.transferred, { key, id: 's', run: info.run });
    }
    worker.finish(key);
  }
}

test('a handover the heir refuses: the shuffle restarts at once without the retiring worker (the heir forgets the old run) and completes', async (t) => {
  const scheduler = await startScheduler(t);
  const a = await FakeWorker.connect(t, scheduler, { auto: false, name: 'a' });
  const b = await FakeWorker.connect(t, scheduler, { auto: false, name: 'b' });
  const heardA = listen(a);
  const heardB = listen(b);
  const client = await FakeClient.connect(t, scheduler);
  const graph: Graph = { 'in-0': task(), 'in-1': task() };
  const nodes = shuffle({ id: 's', inputs: ['in-0', 'in-1'], partitions: 2, split: SPLIT });
  Object.assign(graph, nodes.graph);
  await client.submit(graph, nodes.outputs);

  // Inputs, transfers and the barrier run; a owns output 0, b output 1 (registration order).
  const sent = (w: FakeWorker, key: string): boolean => w.computes.some((c) => c.key === key);
  await waitFor(async () => {
    await runSent(a, (k) => k.includes('-output-'));
    await runSent(b, (k) => k.includes('-output-'));
    return sent(a, 's-output-0') && sent(b, 's-output-1');
  }, 'the unpacks placed on their owners');
  const firstRun = (await a.channel.request<ShuffleRunInfo>(ShuffleMethods.get, { id: 's', partitions: 2 })).run;

  // a retires: its unpack goes back; b inherits its slot and a is told to hand the pieces over.
  a.inFlight.delete('s-output-0');
  a.channel.notify(Methods.workerClosing, { reschedule: ['s-output-0'] });
  await waitFor(() => heardB.expect.length === 1 && heardA.handover.length === 1, 'the slot moving to b');
  assert.deepEqual(heardB.expect[0], { id: 's', run: firstRun, slot: 0, participants: 2, partitions: 2 });
  assert.deepEqual(heardA.handover[0].to, b.data);
  await waitFor(() => b.inFlight.has('s-output-0'), "a's unpack placed on its heir");

  // The heir refuses the pieces: a says so.
  a.channel.notify(ShuffleMethods.handedOver, { id: 's', run: firstRun, slot: 0, ok: false, error: 'the heir refused the pieces' });
  await waitFor(() => heardB.forget.length === 1, 'b told to forget the run that failed');
  assert.deepEqual(heardB.forget[0], { id: 's', run: firstRun });
  await waitFor(async () => {
    await runSent(b);
    return client.ready.has('s-output-0') && client.ready.has('s-output-1');
  }, 'both outputs assembled on b');
  const info = await b.channel.request<ShuffleRunInfo>(ShuffleMethods.get, { id: 's', partitions: 2 });
  assert.ok(info.run > firstRun, 'a new run');
  assert.deepEqual(info.workers, [b.data], 'without the retiring worker');
  assert.ok(!a.computes.slice(a.computes.findIndex((c) => c.key === 's-output-0') + 1).some((c) => c.spec.fn.name === ShuffleFunctions.transfer), 'no transfer ran on the retiring worker');
});
