/** TLS on the control and data channels: mutual TLS with a CA, and every way a certificate can be wrong. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '../../src/client/client.js';
import { LocalCluster } from '../../src/client/local-cluster.js';
import { generateThrowawayCertificates, writeTlsFiles } from '../../src/cluster/certificates.js';
import { Scheduler } from '../../src/scheduler/index.js';
import { TlsError } from '../../src/transfer/errors.js';
import { Worker } from '../../src/worker/index.js';
import { cli } from '../cli/helpers.js';
import { tempDir } from '../helpers/temp-dir.js';
import { fixture } from '../cluster/helpers.js';

const TOKEN = 'tls-test-token';
const certificates = generateThrowawayCertificates();
const stranger = generateThrowawayCertificates({ commonName: 'not of this cluster' });

test('with mutual TLS a worker registers, computes and serves its data; the client fetches over TLS', async (t) => {
  const tls = await certificates;
  const scheduler = await Scheduler.start({ token: TOKEN, tls });
  t.after(() => scheduler.close());
  const workers = await Promise.all([0, 1].map(() => Worker.start({ scheduler: scheduler.address, token: TOKEN, tls, memoryLimit: '32 MiB', nthreads: 1, monitorIntervalMs: false })));
  t.after(() => Promise.all(workers.map((w) => w.close())));
  const client = await Client.connect(scheduler.address, { token: TOKEN, tls });
  t.after(() => client.close());
  // Two inputs on (likely) different workers, summed by one of them: a peer fetch over TLS.
  const graph = { a: { fn: fixture('add'), args: [1, 2] }, b: { fn: fixture('add'), args: [3, 4] }, c: { fn: fixture('add'), args: [{ $ref: 'a' }, { $ref: 'b' }] } };
  assert.deepEqual(await client.compute(graph, ['c']), [10]);
});

test('a client or worker whose certificate another CA signed is refused with TlsError, at once', async (t) => {
  const tls = await certificates;
  const other = await stranger;
  const scheduler = await Scheduler.start({ token: TOKEN, tls });
  t.after(() => scheduler.close());
  const started = Date.now();
  // Neither side's CA signed the other's certificate.
  await assert.rejects(Client.connect(scheduler.address, { token: TOKEN, tls: other, connectTimeoutMs: 30_000 }), (err: unknown) => {
    assert.ok(err instanceof TlsError, String(err));
    assert.equal(err.code, 'SPW_ERR_TLS');
    return true;
  });
  // The scheduler's CA, a certificate it did not sign: refused by the local check before connecting.
  await assert.rejects(Worker.start({ scheduler: scheduler.address, token: TOKEN, tls: { ca: tls.ca, cert: other.cert, key: other.key }, memoryLimit: '32 MiB', nthreads: 1 }), /not signed by the CA/);
  // Only the peer can tell: this side trusts the stranger CA too, the scheduler does not.
  const both = { ca: `${tls.ca}\n${other.ca}`, cert: other.cert, key: other.key };
  await assert.rejects(Client.connect(scheduler.address, { token: TOKEN, tls: both, connectTimeoutMs: 30_000 }), (err: unknown) => {
    assert.ok(err instanceof TlsError, String(err));
    assert.match(err.message, /refused this side's certificate/);
    return true;
  });
  assert.ok(Date.now() - started < 20_000, 'refused without waiting for the connect timeout');
});

test('TLS on one side only is a TlsError (or a refusal), never a hang', async (t) => {
  const tls = await certificates;
  const plain = await Scheduler.start({ token: TOKEN });
  t.after(() => plain.close());
  await assert.rejects(Client.connect(plain.address, { token: TOKEN, tls, connectTimeoutMs: 30_000 }), TlsError);
  const secure = await Scheduler.start({ token: TOKEN, tls });
  t.after(() => secure.close());
  const started = Date.now();
  await assert.rejects(Client.connect(secure.address, { token: TOKEN, connectTimeoutMs: 5_000 }), (err: unknown) => {
    assert.ok(err instanceof TlsError, String(err));
    assert.match(err.message, /may require TLS/);
    return true;
  });
  assert.ok(Date.now() - started < 15_000);
});

test('bad TLS material is a TlsError naming the problem; the CLI exits 2', async (t) => {
  const tls = await certificates;
  const other = await stranger;
  await assert.rejects(Scheduler.start({ tls: { ca: tls.ca, cert: tls.cert, key: other.key } }), /not the private key/);
  await assert.rejects(Scheduler.start({ tls: { cert: 'not a certificate', key: tls.key } }), /not a PEM certificate/);
  const dir = await tempDir(t, 'spillway-tls-');
  const files = await writeTlsFiles(dir, { ca: tls.ca, cert: other.cert, key: other.key });
  const wrong = await cli(['scheduler', '--port', '0', '--tls-ca-file', files.caFile as string, '--tls-cert', files.certFile, '--tls-key', files.keyFile]);
  assert.equal(wrong.code, 2);
  assert.match(wrong.stderr, /not signed by the CA/);
  const missing = await cli(['worker', '--scheduler', '127.0.0.1:9', '--memory-limit', '64Mi', '--tls-cert', `${dir}/absent.pem`, '--tls-key', files.keyFile]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /cannot read the certificate .*absent\.pem/);
  const half = await cli(['scheduler', '--port', '0', '--tls-cert', files.certFile]);
  assert.equal(half.code, 2);
  assert.match(half.stderr, /--tls-cert and --tls-key go together/);
});

test('LocalCluster({ tls: true }) runs every member with a throwaway CA', async (t) => {
  const cluster = await LocalCluster.start({ workers: 1, memoryLimit: '64 MiB', tls: true });
  t.after(() => cluster.close());
  assert.ok(cluster.tls?.ca !== undefined);
  await assert.rejects(Client.connect(cluster.address, { token: cluster.token, connectTimeoutMs: 3_000 }));
  const client = await Client.connect(cluster.address, { token: cluster.token, tls: cluster.tls });
  t.after(() => client.close());
  assert.deepEqual(await client.compute({ x: { fn: fixture('add'), args: [40, 2] } }, ['x']), [42]);
});
