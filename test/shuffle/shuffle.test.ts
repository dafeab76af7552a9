/** The shuffle primitive on real worker processes: pieces pushed where their outputs live, outputs verified exactly. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import { type Graph } from '../../src/cluster/protocol.js';
import { InvalidArgumentError, TaskError } from '../../src/errors.js';
import type { WorkerHeartbeat } from '../../src/cluster/protocol.js';
import type { SchedulerState } from '../../src/scheduler/snapshot.js';
import { barrierKey, shuffle } from '../../src/shuffle/protocol.js';
import { startCluster } from '../cluster/helpers.js';
import { waitFor } from '../helpers/wait.js';
import { ext } from '../helpers/suite.js';

const fx = (name: string): { module: string; name: string } => ({ module: new URL(`./fixtures/split${ext}`, import.meta.url).href, name });

test('shuffle primitive on a 2-worker cluster', async (t) => {
  const cluster = await startCluster(t, { workers: 2, nthreads: 1, memoryLimit: '256 MiB' });
  const client = await Client.connect(cluster.address, { token: cluster.token });
  t.after(() => client.close());

  await t.test('rows of 5 inputs into 3 outputs: each output holds its rows, pieces in input order (no combine: the array of pieces)', async () => {
    const graph: Graph = {};
    const inputs = Array.from({ length: 5 }, (_, i) => {
      graph[`rows-${i}`] = { fn: fx('rows'), args: [i * 100, 100] };
      return `rows-${i}`;
    });
    const nodes = shuffle({ id: 'rows', inputs, partitions: 3, split: fx('byKey') });
    Object.assign(graph, nodes.graph);
    assert.equal(Object.keys(nodes.graph).length, 5 + 1 + 3, '2P + 1 tasks, not P²');
    const outputs = (await client.compute(graph, nodes.outputs)) as Array<Array<Array<{ k: number; v: string }>>>;
    for (let j = 0; j < 3; j++) {
      assert.equal(outputs[j].length, 5, `output ${j} has a piece per input`);
      outputs[j].forEach((piece, i) => {
        const expected = Array.from({ length: 100 }, (_, n) => i * 100 + n).filter((k) => k % 3 === j);
        assert.deepEqual(piece.map((r) => r.k), expected, `output ${j}, piece ${i}`);
        assert.ok(piece.every((r) => r.v === `row-${r.k}`));
      });
    }
  });

  await t.test('pieces larger than a push frame are cut into parts and joined again, bytes exact', async () => {
    const graph: Graph = {};
    const sizes = [12 * 1024 * 1024 + 13, 5 * 1024 * 1024 + 3];
    const inputs = sizes.map((size, i) => {
      graph[`bytes-${i}`] = { fn: fx('pattern'), args: [size, i] };
      return `bytes-${i}`;
    });
    const nodes = shuffle({ id: 'big', inputs, partitions: 2, split: fx('slices'), combine: fx('digest') });
    Object.assign(graph, nodes.graph);
    const got = await client.compute(graph, nodes.outputs);
    const { pattern, slices, digest } = await import('./fixtures/split.js');
    const pieces = sizes.map((size, i) => slices(pattern(size, i), 2));
    assert.deepEqual(got, [0, 1].map((j) => digest(pieces.map((p) => p[j]))));
    // Half of every input's bytes belong to the other worker's output: pushed, and counted (transfer_bytes_total).
    const pushed = async (): Promise<{ sent: number; received: number }> => {
      const beats = (await cluster.state()).workers.map((w) => w.lastHeartbeat);
      return { sent: beats.reduce((n, b) => n + (b?.shuffleSentBytes ?? 0), 0), received: beats.reduce((n, b) => n + (b?.shuffleReceivedBytes ?? 0), 0) };
    };
    await waitFor(async () => {
      const { sent, received } = await pushed();
      return sent >= (sizes[0] + sizes[1]) / 2 - 1024 * 1024 && received === sent;
    }, 'shuffle bytes in the heartbeats');
  });

  await t.test('a split that does not return P pieces fails the graph with SPW_ERR_SHUFFLE_SPLIT', async () => {
    const graph: Graph = { x: { fn: fx('rows'), args: [0, 10] } };
    const nodes = shuffle({ id: 'bad', inputs: ['x'], partitions: 4, split: fx('tooFew') });
    Object.assign(graph, nodes.graph);
    const err = await client.compute(graph, nodes.outputs).then(
      () => assert.fail('compute should reject'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof TaskError, String(err));
    assert.equal(err.remoteCode, 'SPW_ERR_SHUFFLE_SPLIT');
    assert.match(err.message, /4 pieces/);
  });

  await t.test('512 partitions: 2P + 1 shuffle tasks; every value lands in its output', async () => {
    const P = 512;
    const graph: Graph = {};
    const inputs = Array.from({ length: P }, (_, i) => {
      graph[`tiny-${i}`] = { fn: fx('tiny'), args: [i] };
      return `tiny-${i}`;
    });
    const nodes = shuffle({ id: 'wide', inputs, split: fx('spread'), combine: fx('count') });
    Object.assign(graph, nodes.graph);
    const counts = (await client.compute(graph, nodes.outputs)) as number[];
    assert.deepEqual(counts, new Array(P).fill(2));
  });

  /** Shuffles a worker holds anything of, and the values in its store (its results all released, it holds none). */
  const leftOver = async (): Promise<Array<{ shuffles: number | undefined; values: number }>> =>
    (await cluster.state()).workers.map((w) => {
      const beat = w.lastHeartbeat as WorkerHeartbeat;
      return { shuffles: beat.shufflesHeld, values: beat.memory.count + beat.pinned.count + beat.disk.count };
    });
  const nothingLeft = async (what: string): Promise<void> => {
    let last: unknown;
    await waitFor(async () => {
      const held = await leftOver();
      last = held;
      return held.every((w) => w.shuffles === 0 && w.values === 0);
    }, what).catch((err: unknown) => assert.fail(`${String(err)}; last heartbeats: ${JSON.stringify(last)}`));
  };

  await t.test('every shuffle above is over once its outputs are released (or it failed): no worker holds a run, a frame id or a piece of it', async () => {
    await nothingLeft('every worker to hold no shuffle and no value');
  });

  await t.test('a shuffle whose outputs are never assembled: its pieces are deleted on every worker once the graph is released', async () => {
    // Pieces as large as a chunk go to the store at once; only the barrier is wanted, so no unpack takes them.
    const graph: Graph = {};
    const inputs = [0, 1].map((i) => {
      graph[`left-${i}`] = { fn: fx('pattern'), args: [9 * 1024 * 1024, i] };
      return `left-${i}`;
    });
    const nodes = shuffle({ id: 'unassembled', inputs, partitions: 2, split: fx('slices') });
    Object.assign(graph, nodes.graph);
    const [barrier] = client.persist(graph, [barrierKey('unassembled')]);
    assert.equal(await barrier.result(), 2);
    // The barrier's value on one worker, and each output's two pieces in chunks on its owner.
    await waitFor(async () => (await leftOver()).every((w) => w.values >= 1), 'the pieces stored as chunks on both workers');
    await barrier.release();
    await nothingLeft('the unassembled pieces to be deleted');
  });

  await t.test("a retiring worker's heir killed while the pieces move to it: the shuffle restarts without either and the outputs verify", async () => {
    const graph: Graph = {};
    const inputs = [0, 1, 2, 3].map((i) => {
      graph[`heir-${i}`] = { fn: fx('rows'), args: [i * 100, 100] };
      return `heir-${i}`;
    });
    // Assemblies that take a while: outputs are still to assemble once every piece is stored.
    const nodes = shuffle({ id: 'heir-lost', inputs, partitions: 4, split: fx('byKey'), combine: fx('slowKeys'), combineArgs: [200] });
    Object.assign(graph, nodes.graph);
    const [barrier, ...outputs] = client.persist(graph, [barrierKey('heir-lost'), ...nodes.outputs]);
    await barrier.result();
    // local-0 retires: its slot goes to local-1, which is killed as the pieces move (or about to).
    const retired = client.retireWorkers(['local-0']);
    const state = async (): Promise<SchedulerState> => (await cluster.state()) as SchedulerState;
    // Retiring, or (on a fast machine) already gone.
    await waitFor(async () => !(await state()).workers.some((w) => w.name === 'local-0' && !w.closing), 'local-0 retiring');
    await cluster.killWorker(1, 'SIGKILL');
    const got = (await client.gather(outputs)) as number[][];
    for (let j = 0; j < 4; j++) assert.deepEqual(got[j], Array.from({ length: 400 }, (_, k) => k).filter((k) => k % 4 === j), `output ${j}`);
    await retired;
    for (const future of [barrier, ...outputs]) await future.release();
    assert.ok((await state()).counters.tasksRecomputed > 0, 'the restarted shuffle computed its inputs again');
  });

  await t.test('bad options are refused before anything is sent', () => {
    assert.throws(() => shuffle({ id: '', inputs: ['a'], split: fx('byKey') }), InvalidArgumentError);
    assert.throws(() => shuffle({ id: 's', inputs: [], split: fx('byKey') }), InvalidArgumentError);
    assert.throws(() => shuffle({ id: 's', inputs: ['a'], partitions: 0, split: fx('byKey') }), InvalidArgumentError);
    assert.throws(() => shuffle({ id: 's', inputs: ['a'], split: { module: '', name: 'x' } }), InvalidArgumentError);
    assert.throws(() => shuffle({ id: 's', inputs: ['a'], partitions: 2, split: fx('byKey'), outputKey: () => 'same' }), InvalidArgumentError);
  });
});
