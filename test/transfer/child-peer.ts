/**
 * A peer in its own process, for tests that SIGKILL it mid-transfer.
 *   serve <MiB>           : a store holding 'big' (spilled) and 'small'; prints {"port"}.
 *   fetch <port> <key>    : fetches the key into a fresh store; prints "fetching" first.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { SpillStore } from '../../src/index.js';
import { DataClient, DataServer } from '../../src/transfer/index.js';

const [mode, arg1, arg2] = process.argv.slice(2);
const directory = await fs.mkdtemp(path.join(os.tmpdir(), 'spw-transfer-child-'));
process.on('exit', () => undefined);
const store = await SpillStore.open({ memoryLimit: '1 GiB', monitorIntervalMs: 0, directory });

if (mode === 'serve') {
  store.set('small', Buffer.alloc(1000, 1));
  store.set('big', Buffer.alloc(Number(arg1) * 1024 * 1024, 2));
  await store.evict(Infinity);
  const server = await DataServer.listen(store);
  process.stdout.write(`${JSON.stringify({ port: server.address.port, directory })}\n`);
} else if (mode === 'fetch') {
  process.stdout.write(`${JSON.stringify({ directory })}\n`);
  await new DataClient({ diskQueueBytes: 1 << 20 }).fetch({ host: '127.0.0.1', port: Number(arg1) }, [arg2], store);
  process.stdout.write('done\n');
}
