/**
 * Spillway across hosts, for real: the scheduler, three workers and the client each in their
 * own network namespace with their own address (no loopback shortcut). Skipped, saying why,
 * only where namespaces cannot be made (not root, no iproute2).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { generateThrowawayCertificates, writeTlsFiles } from '../../src/cluster/certificates.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait.js';
import { Lines, Topology, hasCommand, netnsUnavailable } from './netns.js';
import { nodeImports, repoRoot, suiteModule } from '../helpers/suite.js';

const main = suiteModule('src/cli/main');
const clientScript = suiteModule('test/net/fixtures/client');
const TOKEN = randomBytes(16).toString('hex');
const CONTROL = 8786;
const HTTP = 8787;
const DATA = 7000;

const unavailable = await netnsUnavailable();

test('a cluster across network namespaces', { skip: unavailable, timeout: 240_000 }, async (t) => {
  const topology = await Topology.create(['s', 'w1', 'w2', 'w3', 'c']);
  t.after(() => topology.destroy());
  const dir = await tempDir(t, 'spillway-netns-');
  const scheduler = topology.host('s');
  const workerHosts = ['w1', 'w2', 'w3'].map((name) => topology.host(name));
  const clientHost = topology.host('c');
  const baseEnv: NodeJS.ProcessEnv = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SPILLWAY_'))), SPILLWAY_TOKEN: TOKEN };
  const certificates = await generateThrowawayCertificates({ hosts: [...topology.hosts.values()].map((h) => h.address) });
  const files = await writeTlsFiles(dir, certificates);
  const tlsEnv: NodeJS.ProcessEnv = { ...baseEnv, SPILLWAY_TLS_CA_FILE: files.caFile, SPILLWAY_TLS_CERT: files.certFile, SPILLWAY_TLS_KEY: files.keyFile };
  const cli = (ns: string, args: string[], env: NodeJS.ProcessEnv): Lines => new Lines(topology.spawn(ns, process.execPath, [...nodeImports, main, ...args], { env, cwd: repoRoot }));
  const client = (args: string[], env: NodeJS.ProcessEnv): Lines => new Lines(topology.spawn(clientHost.ns, process.execPath, [...nodeImports, clientScript, ...args], { env, cwd: repoRoot }));
  const worker = (host: { ns: string }, port: number, env: NodeJS.ProcessEnv, extra: string[] = []): Lines =>
    cli(host.ns, ['worker', '--scheduler', `${scheduler.address}:${port}`, '--host', '0.0.0.0', '--port', String(DATA), '--memory-limit', '64Mi', '--nthreads', '1', '--connect-timeout', '90s', ...extra], env);
  // A 16 MiB capture buffer (-B, in KiB): on a loaded host the default 2 MiB can overflow
  // during a burst, and a dropped packet could be the one that carries the marker.
  const capture = async (file: string): Promise<{ stop: () => Promise<Buffer>; log: () => string }> => {
    const tcpdump = new Lines(topology.spawn(topology.switchNs, 'tcpdump', ['-i', 'br0', '-U', '-B', '16384', '-s', '0', '-w', file, 'tcp']));
    await waitFor(() => /listening on/.test(tcpdump.stderr), 'tcpdump to start', 10_000).catch((err: Error) => {
      throw new Error(`${err.message}:\n${tcpdump.stderr}`);
    });
    return {
      stop: async () => {
        tcpdump.child.kill('SIGINT');
        await tcpdump.exited;
        return readFile(file);
      },
      // tcpdump's own report once stopped: packets captured, and dropped by the kernel.
      log: () => tcpdump.stderr.trim(),
    };
  };

  // The TLS cluster's workers start first: their scheduler comes up 20 s later.
  const workersStarted = Date.now();
  const workers = workerHosts.map((host) => worker(host, CONTROL, tlsEnv));

  await t.test('control run without TLS: the planted marker is visible in a capture of the wire', { skip: (await hasCommand('tcpdump')) ? undefined : 'tcpdump is not installed (.ci/run installs it)' }, async () => {
    const plainScheduler = cli(scheduler.ns, ['scheduler', '--host', '0.0.0.0', '--port', '7786', '--http-port', '0'], baseEnv);
    await plainScheduler.waitFor('listening', 30_000);
    const plainWorker = worker(workerHosts[0], 7786, baseEnv, ['--port', '7001']);
    await plainWorker.waitFor('ready', 30_000);
    const marker = `SPILLWAY-PLAIN-${randomBytes(8).toString('hex')}`;
    const wire = await capture(path.join(dir, 'plain.pcap'));
    const run = client([`${scheduler.address}:7786`, 'marker'], { ...baseEnv, MARKER: marker });
    const result = await run.waitFor('marker', 60_000);
    const bytes = await wire.stop();
    assert.equal(result.verified, true, JSON.stringify(result));
    assert.ok(bytes.includes(Buffer.from(marker)), `without TLS the marker crosses the wire in clear (${bytes.length} bytes captured; tcpdump: ${wire.log()})`);
    plainWorker.child.kill('SIGTERM');
    plainScheduler.child.kill('SIGTERM');
    await Promise.all([plainWorker.exited, plainScheduler.exited]);
  });

  await waitFor(() => Date.now() - workersStarted >= 20_000, '20 s', 30_000);
  const schedulerStarted = Date.now();
  const tlsScheduler = cli(scheduler.ns, ['scheduler', '--host', '0.0.0.0', '--port', String(CONTROL), '--http-port', String(HTTP), '--heartbeat-interval', '250'], tlsEnv);
  await tlsScheduler.waitFor('listening', 30_000);

  await t.test('workers started 20 s before their scheduler join it once it comes up', async () => {
    const ready = await Promise.all(workers.map((w) => w.waitFor('ready', 60_000)));
    for (const [i, event] of ready.entries()) {
      assert.ok((event.at as number) >= schedulerStarted, `worker ${i} registered after the scheduler started`);
      assert.deepEqual(event.data, { host: workerHosts[i].address, port: DATA }, 'it advertises its own host address, not 0.0.0.0');
    }
  });

  await t.test('a worker advertising 127.0.0.1 to a remote scheduler is refused, naming both addresses', async () => {
    const wrong = cli(workerHosts[1].ns, ['worker', '--scheduler', `${scheduler.address}:${CONTROL}`, '--host', '127.0.0.1', '--port', '7002', '--memory-limit', '32Mi', '--nthreads', '1'], tlsEnv);
    assert.equal(await wrong.exited, 2, wrong.stderr);
    assert.match(wrong.stderr, new RegExp(`advertises 127\\.0\\.0\\.1:7002 .*connected from ${workerHosts[1].address.replace(/\./g, '\\.')}`));
  });

  await t.test('with TLS a shuffle across three worker hosts verifies, and the marker never appears on the wire', { skip: (await hasCommand('tcpdump')) ? undefined : 'tcpdump is not installed (.ci/run installs it)' }, async () => {
    const wire = await capture(path.join(dir, 'tls.pcap'));
    const shuffle = await client([`${scheduler.address}:${CONTROL}`, 'shuffle'], tlsEnv).waitFor('shuffle', 120_000);
    assert.equal(shuffle.verified, true, JSON.stringify(shuffle));
    const marker = `SPILLWAY-TLS-${randomBytes(8).toString('hex')}`;
    const planted = await client([`${scheduler.address}:${CONTROL}`, 'marker'], { ...tlsEnv, MARKER: marker }).waitFor('marker', 60_000);
    assert.equal(planted.verified, true, JSON.stringify(planted));
    const bytes = await wire.stop();
    assert.ok(bytes.length > 1_000_000, `the capture holds the shuffle's traffic (${bytes.length} bytes)`);
    assert.equal(bytes.includes(Buffer.from(marker)), false, 'the marker is never on the wire in clear');
    assert.equal(bytes.includes(Buffer.from(TOKEN)), false, 'nor is the token');
  });

  await t.test('a worker host cut off mid-job: the job verifies and the scheduler reports the worker lost', async () => {
    const slow = client([`${scheduler.address}:${CONTROL}`, 'slow', `${scheduler.address}:${HTTP}`], tlsEnv);
    await slow.waitFor('submitted', 30_000);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await topology.cut('w3');
    const result = await slow.waitFor('slow', 120_000);
    assert.equal(result.verified, true, JSON.stringify(result));
    assert.ok((result.workersLost as number) >= 1, JSON.stringify(result));
    assert.equal(result.workers, 2, 'the cut worker is gone from the scheduler\'s state');
  });
});

if (unavailable !== undefined) test(`multi-host tests skipped: ${unavailable}`, { skip: unavailable }, () => undefined);
