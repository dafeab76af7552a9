/**
 * A split asks the worker's room for what it will hold at once: the thread's copy of the
 * input, the user's pieces (alive until they are laid out) and the frames they are laid
 * out in, each about the input's size.
 */
import assert from 'node:assert/strict';
import { randomFillSync } from 'node:crypto';
import { test } from 'node:test';
import { sizeof } from '../../src/codec/sizeof.js';
import { ShuffleFunctions, type ShuffleRunInfo, type TransferMeta } from '../../src/shuffle/protocol.js';
import { ShuffleService } from '../../src/shuffle/worker-service.js';
import { DataServer } from '../../src/transfer/server.js';
import { Executor } from '../../src/worker/executor.js';
import type { Room, RoomClaim } from '../../src/worker/room.js';
import { onCleanup } from '../helpers/cleanup.js';
import { runInfoChannel } from '../helpers/shuffle-records.js';
import { MiB, openStore } from '../helpers/store.js';
import { ext } from '../helpers/suite.js';

test("a split claims room for its input's copy, the pieces and the frames: three times its input", async (t) => {
  const executor = new Executor(1);
  onCleanup(t, () => executor.close());
  const { store } = await openStore(t, { memoryLimit: 1024 * MiB });
  const services: ShuffleService[] = [];
  const server = await DataServer.listen(store, { host: '127.0.0.1', onRequest: (body, payload) => services[0].onRequest(body, payload) });
  onCleanup(t, () => server.close());
  const info: ShuffleRunInfo = { run: 1, workers: [server.address], done: [] };
  const channel = runInfoChannel(info);
  const claims: number[] = [];
  let open = 0;
  const room = {
    claim: async (bytes: number): Promise<RoomClaim> => {
      claims.push(bytes);
      open++;
      return { rounds: 0, release: () => void open-- } as RoomClaim;
    },
  } as unknown as Room;
  const service = new ShuffleService({ store, executor, channel: () => channel, token: undefined, self: server.address, retryMs: 5_000, room });
  services.push(service);
  t.after(() => service.close());
  const input = randomFillSync(new Uint8Array(6 * MiB));
  const meta: TransferMeta = { id: 's', partitions: 2, input: 0, split: { module: new URL(`./fixtures/split${ext}`, import.meta.url).href, name: 'slices' }, splitArgs: [] };
  const result = await service.run({ key: 'transfer-0', name: ShuffleFunctions.transfer, args: [input, meta] });
  assert.ok(result.ok, JSON.stringify(result));
  assert.deepEqual(claims, [3 * sizeof(input)], 'no spares yet: the whole of it');
  assert.equal(open, 0, 'the claim is released once the split ends');
});
