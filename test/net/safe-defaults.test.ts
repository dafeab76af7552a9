/** Safe defaults: no open port beyond loopback without authentication, a module allow-list, HTTP host and bearer token. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import { checkAllowedModules, parseAllowModules } from '../../src/cluster/security.js';
import { builtins } from '../../src/cluster/protocol.js';
import { GraphError } from '../../src/errors.js';
import { Scheduler } from '../../src/scheduler/index.js';
import { Worker } from '../../src/worker/index.js';
import { cli, firstJsonLine, spawnCli } from '../cli/helpers.js';
import { fixture } from '../cluster/helpers.js';
import { ext } from '../helpers/suite.js';

test('listening on 0.0.0.0 without a token or TLS with a CA is refused (InsecureBindError) unless insecure', async (t) => {
  await assert.rejects(Scheduler.start({ host: '0.0.0.0' }), (err: unknown) => {
    assert.equal((err as { code?: string }).code, 'SPW_ERR_INSECURE');
    assert.match(String(err), /refusing to listen on 0\.0\.0\.0 without a token or TLS with a CA.*--insecure/);
    return true;
  });
  await assert.rejects(Worker.start({ scheduler: { host: '127.0.0.1', port: 9 }, host: '0.0.0.0', memoryLimit: '32 MiB', nthreads: 1 }), { code: 'SPW_ERR_INSECURE' });
  const withToken = await Scheduler.start({ host: '0.0.0.0', token: 'secret' });
  await withToken.close();
  const insecure = await Scheduler.start({ host: '0.0.0.0', insecure: true });
  await insecure.close();
  const result = await cli(['scheduler', '--host', '0.0.0.0', '--port', '0'], { env: { ...process.env, SPILLWAY_TOKEN: '' } });
  assert.equal(result.code, 2);
  assert.match(result.stderr, /refusing to listen on 0\.0\.0\.0/);
  // --insecure from the environment, as every flag: it starts.
  const child = spawnCli(['scheduler', '--host', '0.0.0.0', '--port', '0'], { env: { ...process.env, SPILLWAY_TOKEN: '', SPILLWAY_INSECURE: '1' } });
  t.after(() => child.kill('SIGKILL'));
  const listening = await firstJsonLine(child);
  assert.equal(listening.event, 'listening');
});

test('--allow-modules: a graph naming another module fails with GraphError before any of it runs', async (t) => {
  const allowed = new URL('../cluster/fixtures/', import.meta.url).href;
  const scheduler = await Scheduler.start({ token: 't', allowModules: [allowed, 'node:zlib'] });
  t.after(() => scheduler.close());
  const worker = await Worker.start({ scheduler: scheduler.address, token: 't', memoryLimit: '32 MiB', nthreads: 1, monitorIntervalMs: false });
  t.after(() => worker.close());
  const client = await Client.connect(scheduler.address, { token: 't' });
  t.after(() => client.close());
  assert.deepEqual(await client.compute({ ok: { fn: fixture('add'), args: [1, 2] }, item: { fn: builtins.getitem, args: [[5, 6], 1] } }, ['ok', 'item']), [3, 6]);
  const graph = {
    fine: { fn: fixture('add'), args: [1, 1] },
    shell: { fn: { module: 'node:child_process', name: 'execSync' }, args: ['touch /tmp/spillway-should-never-exist'] },
    escape: { fn: { module: `${allowed}../helpers${ext}`, name: 'exists' }, args: ['/'] },
  };
  await assert.rejects(client.compute(graph, ['fine', 'shell', 'escape']), (err: unknown) => {
    assert.ok(err instanceof GraphError, String(err));
    assert.match(err.message, /not in the scheduler's allow-list.*shell.*escape/);
    return true;
  });
  assert.equal(scheduler.state().tasks.total ?? 0, 0, 'nothing of the graph was added');
});

test('allow-list parsing and matching', () => {
  assert.throws(() => parseAllowModules(' , '), /at least one/);
  const list = parseAllowModules('file:///srv/jobs/, node:') as string[];
  assert.deepEqual(list, ['file:///srv/jobs/', 'node:']);
  checkAllowedModules([{ key: 'a', spec: { fn: { module: 'file:///srv/jobs/x.js', name: 'f' } } }, { key: 'b', spec: { fn: { module: 'node:zlib', name: 'f' } } }], list);
  assert.throws(() => checkAllowedModules([{ key: 'c', spec: { fn: { module: 'file:///srv/jobs/../etc/x.js', name: 'f' } } }], list), GraphError);
  checkAllowedModules([{ key: 'd', spec: { fn: { module: 'anything', name: 'f' } } }], undefined);
});

test('HTTP: --http-host and a bearer token for /metrics and /api/state; /health open for probes', async (t) => {
  const scheduler = await Scheduler.start({ token: 't', httpPort: 0, httpHost: '127.0.0.1', httpToken: 'http-secret' });
  t.after(() => scheduler.close());
  const base = `http://127.0.0.1:${scheduler.httpAddress?.port}`;
  assert.equal((await fetch(`${base}/metrics`)).status, 401);
  assert.equal((await fetch(`${base}/api/state`, { headers: { authorization: 'Bearer wrong' } })).status, 401);
  assert.equal((await fetch(`${base}/metrics`, { headers: { authorization: 'Bearer http-secret' } })).status, 200);
  const health = await fetch(`${base}/health`);
  assert.equal(health.status, 200);
  assert.equal(await health.text(), 'ok\n');
  const worker = await Worker.start({ scheduler: scheduler.address, token: 't', memoryLimit: '32 MiB', nthreads: 1, monitorIntervalMs: false, httpPort: 0, httpToken: 'http-secret' });
  t.after(() => worker.close());
  const workerBase = `http://127.0.0.1:${worker.httpAddress?.port}`;
  assert.equal((await fetch(`${workerBase}/metrics`)).status, 401);
  assert.equal((await fetch(`${workerBase}/health`)).status, 200);
});
