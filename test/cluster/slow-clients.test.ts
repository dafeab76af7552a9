/**
 * Slow and silent clients on the scheduler's ports (issue 33, item 5): idle and
 * partial-header HTTP connections are dropped and capped, so under a 256-descriptor limit
 * the control port still takes clients; a control connection that authenticates and never
 * registers is closed.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { type TestContext, test } from 'node:test';
import { Client } from '../../src/client/client.js';
import { waitFor } from '../helpers/wait.js';
import { Channel } from '../../src/control/index.js';
import { Scheduler } from '../../src/scheduler/index.js';
import { ext, nodeImports } from '../helpers/suite.js';

const token = 'slow-clients-test-token';
type Address = { host: string; port: number };

/** A scheduler process under `ulimit -n 256`, with `options`. */
async function limitedScheduler(t: TestContext, options: object): Promise<{ address: Address; http: Address }> {
  const fixture = new URL(`./fixtures/scheduler-child${ext}`, import.meta.url).pathname;
  const child: ChildProcess = spawn('sh', ['-c', 'ulimit -n 256 && exec "$@"', 'sh', process.execPath, ...nodeImports, fixture, JSON.stringify(options)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  t.after(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.stdin?.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  });
  const [line] = (await Promise.race([
    once(child.stdout as NodeJS.ReadableStream, 'data'),
    once(child, 'exit').then(() => assert.fail('the scheduler process exited early')),
  ])) as [Buffer];
  return JSON.parse(line.toString()) as { address: Address; http: Address };
}

/** Opens `count` connections that send nothing (every other one half a request's headers). */
async function idleSockets(t: TestContext, address: Address, count: number): Promise<{ closed: () => number }> {
  let closed = 0;
  const sockets: net.Socket[] = [];
  t.after(() => {
    for (const socket of sockets) socket.destroy();
  });
  await Promise.all(
    Array.from({ length: count }, (_, i) => {
      const socket = net.connect(address.port, address.host);
      sockets.push(socket);
      socket.on('error', () => undefined);
      socket.once('close', () => closed++);
      socket.resume(); // reads (and drops) the 408, so the server's close is seen here
      if (i % 2 === 1) socket.write('GET /api/state HTTP/1.1\r\nHost: x\r\n');
      return once(socket, 'connect').catch(() => undefined);
    }),
  );
  return { closed: () => closed };
}

test('300 idle HTTP connections under a 256-descriptor limit: the control port still registers clients, and the idle ones are dropped', { timeout: 60_000 }, async (t) => {
  const { address, http } = await limitedScheduler(t, { token, httpPort: 0, http: { headersTimeoutMs: 1_000, requestTimeoutMs: 2_000 } });
  const idle = await idleSockets(t, http, 300);
  // Over the cap (100) they are closed as they arrive; the rest leave descriptors for the control port.
  const client = await Client.connect(address, { token });
  await client.close();
  // Silent and partial-header connections get 408 and are closed after headersTimeoutMs.
  await waitFor(() => idle.closed() === 300, 'every idle HTTP connection to be closed by the scheduler', 20_000);
  const response = await fetch(`http://${http.host}:${http.port}/api/state`);
  assert.equal(response.status, 200);
  assert.equal(((await response.json()) as { workers: unknown[] }).workers.length, 0);
});

test('an authenticated control connection that never registers is closed after registerTimeoutMs', { timeout: 30_000 }, async (t) => {
  const scheduler = await Scheduler.start({ token, registerTimeoutMs: 500 });
  t.after(() => scheduler.close());
  const channel = await Channel.connect(scheduler.address, { token });
  t.after(() => channel.close());
  const started = Date.now();
  let open = true;
  channel.once('close', () => (open = false));
  await waitFor(() => !open, 'the scheduler to close the silent channel', 10_000);
  assert.ok(Date.now() - started >= 400, 'not before the deadline');
  // A client that registers in time is kept.
  const client = await Client.connect(scheduler.address, { token });
  t.after(() => client.close());
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  assert.equal(scheduler.state().clients.length, 1);
});

test('HTTP and registration limits are checked', async () => {
  await assert.rejects(Scheduler.start({ httpPort: 0, http: { headersTimeoutMs: 0 } }), { code: 'SPW_ERR_INVALID_ARG' });
  await assert.rejects(Scheduler.start({ httpPort: 0, http: { headersTimeoutMs: 5_000, requestTimeoutMs: 1_000 } }), { code: 'SPW_ERR_INVALID_ARG' });
  await assert.rejects(Scheduler.start({ httpPort: 0, http: { maxConnections: 0 } }), { code: 'SPW_ERR_INVALID_ARG' });
  await assert.rejects(Scheduler.start({ registerTimeoutMs: -5 }), { code: 'SPW_ERR_INVALID_ARG' });
});
