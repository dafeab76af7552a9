import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import { describe, it, type TestContext } from 'node:test';
import { DataClient, DataServer, TransferError } from '../../src/transfer/index.js';
import { pattern, watchIncoming, newStore } from './helpers.js';
import { waitFor } from '../helpers/wait.js';
import { onCleanup } from '../helpers/cleanup.js';
import { nodeImports, suiteModule } from '../helpers/suite.js';

const MiB = 1024 * 1024;
const child = suiteModule('test/transfer/child-peer');

/** Starts a child peer; resolves with its first stdout line (JSON). */
async function spawnPeer(t: TestContext, args: string[]): Promise<{ proc: ChildProcess; info: { port?: number; directory: string } }> {
  const proc = spawn(process.execPath, [...nodeImports, child, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  onCleanup(t, async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGKILL');
      await new Promise((r) => proc.once('exit', r));
    }
  });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    proc.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')));
    });
    proc.once('exit', () => reject(new Error('child exited early')));
  });
  const info = JSON.parse(line) as { port?: number; directory: string };
  // A SIGKILLed child cannot clean up after itself.
  onCleanup(t, () => fs.rm(info.directory, { recursive: true, force: true }));
  return { proc, info };
}

describe('peer killed mid-transfer', () => {
  it('a server killed mid-value: the client fails with TransferError and its store is unchanged', async (t) => {
    const { proc, info } = await spawnPeer(t, ['serve', '256']);
    const target = await newStore(t);
    let killed = false;
    const watched = watchIncoming(target, (_key, received) => {
      if (!killed && received > 8 * MiB) {
        killed = true;
        proc.kill('SIGKILL');
      }
    });
    const fetching = new DataClient({ diskQueueBytes: MiB }).fetch({ host: '127.0.0.1', port: info.port ?? 0 }, ['small', 'big'], watched);
    await assert.rejects(fetching, TransferError);
    assert.ok(killed);
    assert.equal(target.has('small'), false, 'the value received before the kill is rolled back');
    assert.equal(target.has('big'), false);
    assert.equal(target.stats().disk.count, 0);
    assert.equal(target.stats().keys, 0);
  });

  it('a client killed mid-value: the server releases the key and goes on serving', async (t) => {
    const source = await newStore(t);
    source.set('big', pattern(256 * MiB));
    await source.evict(Infinity);
    const server = await DataServer.listen(source);
    onCleanup(t, () => server.close());
    const { proc } = await spawnPeer(t, ['fetch', String(server.address.port), 'big']);
    await waitFor(() => server.stats().bytesInFlight > 0);
    proc.kill('SIGKILL');
    await waitFor(() => server.stats().activeRequests === 0 && server.stats().bytesInFlight === 0);
    assert.equal(server.stats().aborted, 1);
    assert.equal(source.delete('big'), true);
    source.set('next', pattern(1000));
    const target = await newStore(t);
    await new DataClient().fetch(server.address, ['next'], target);
    assert.deepEqual(await target.get('next'), pattern(1000));
  });
});
