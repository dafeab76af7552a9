import assert from 'node:assert/strict';
import { test } from 'node:test';
import { contactAddress, firstExternalAddress, isLoopback, isUnspecified } from '../../src/cluster/address.js';
import { checkReachable } from '../../src/scheduler/workers.js';

test('loopback and unspecified addresses', () => {
  for (const host of ['127.0.0.1', '127.3.2.1', '::1', '[::1]', 'localhost', '::ffff:127.0.0.1']) assert.equal(isLoopback(host), true, host);
  for (const host of ['10.0.0.1', '0.0.0.0', 'example.org', '::']) assert.equal(isLoopback(host), false, host);
  for (const host of ['0.0.0.0', '::', '[::]']) assert.equal(isUnspecified(host), true, host);
});

test('the advertised address: the contact address, else the bound one, else the first non-loopback address', async () => {
  assert.deepEqual(await contactAddress({ host: '10.1.2.3', port: 4000 }, undefined), { host: '10.1.2.3', port: 4000 });
  assert.deepEqual(await contactAddress({ host: '0.0.0.0', port: 4000 }, '192.0.2.7:31000'), { host: '192.0.2.7', port: 31000 });
  assert.deepEqual(await contactAddress({ host: '0.0.0.0', port: 4000 }, { host: 'localhost', port: 1 }), { host: 'localhost', port: 1 });
  const bound = await contactAddress({ host: '0.0.0.0', port: 4000 }, undefined);
  assert.equal(bound.port, 4000);
  assert.equal(bound.host, firstExternalAddress() ?? '127.0.0.1');
  await assert.rejects(contactAddress({ host: '0.0.0.0', port: 1 }, '0.0.0.0:5000'), /names no host a peer can connect to/);
  await assert.rejects(contactAddress({ host: '0.0.0.0', port: 1 }, 'nowhere.invalid:5000'), /does not resolve/);
  await assert.rejects(contactAddress({ host: '0.0.0.0', port: 1 }, 'no-port'), /HOST:PORT/);
  const interfaces = {
    lo: [{ address: '127.0.0.1', family: 'IPv4', internal: true, netmask: '', mac: '', cidr: null }],
    eth0: [
      { address: 'fe80::1', family: 'IPv6', internal: false, netmask: '', mac: '', cidr: null, scopeid: 2 },
      { address: '10.9.8.7', family: 'IPv4', internal: false, netmask: '', mac: '', cidr: null },
    ],
  } as unknown as Parameters<typeof firstExternalAddress>[0];
  assert.equal(firstExternalAddress(interfaces), '10.9.8.7');
});

test('the scheduler refuses a loopback or unspecified data address from another host, naming both', () => {
  checkReachable({ host: '127.0.0.1', port: 5 }, '127.0.0.1');
  checkReachable({ host: '10.0.0.2', port: 5 }, '10.0.0.2');
  assert.throws(() => checkReachable({ host: '127.0.0.1', port: 5 }, '10.0.0.2'), (err: unknown) => {
    assert.equal((err as { code?: string }).code, 'SPW_ERR_ADDRESS');
    assert.match(String(err), /advertises 127\.0\.0\.1:5 .*connected from 10\.0\.0\.2.*--contact-address/);
    return true;
  });
  assert.throws(() => checkReachable({ host: '0.0.0.0', port: 5 }, '127.0.0.1'), { code: 'SPW_ERR_ADDRESS' });
});
