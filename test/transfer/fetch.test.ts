import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { DataClient, DataServer } from '../../src/transfer/index.js';
import { ClientConnection } from '../../src/transfer/client-connection.js';
import { pattern, newStore } from './helpers.js';
import { onCleanup } from '../helpers/cleanup.js';

const MiB = 1024 * 1024;

describe('fetch between stores', () => {
  async function pair(t: TestContext, serverOptions = {}) {
    const source = await newStore(t);
    const target = await newStore(t);
    const server = await DataServer.listen(source, serverOptions);
    onCleanup(t, () => server.close());
    return { source, target, server };
  }

  it('moves values in memory and spilled, of 0 B, 1 B and several MiB, bit for bit', async (t) => {
    const { source, target, server } = await pair(t);
    const values: Record<string, unknown> = {
      empty: Buffer.alloc(0),
      emptyTyped: new Float64Array(0),
      one: Buffer.from([7]),
      big: pattern(5 * MiB),
      floats: new Float64Array(300_000).map((_, i) => i / 3),
      nested: { a: [1, 'two', { three: new Int32Array([3, 3, 3]) }], m: new Map([[1, 'x']]) },
      text: 'hello',
    };
    for (const [k, v] of Object.entries(values)) source.set(`mem-${k}`, v);
    for (const [k, v] of Object.entries(values)) source.set(`disk-${k}`, v);
    await source.evict(Infinity);
    // Put the mem- values back in memory so both paths are served.
    for (const k of Object.keys(values)) await source.get(`mem-${k}`);
    const keys = Object.keys(values).flatMap((k) => [`mem-${k}`, `disk-${k}`]);
    assert.equal(source.where('disk-big'), 'disk');
    const client = new DataClient();
    const result = await client.fetch(server.address, keys, target);
    assert.deepEqual(result.fetched.sort(), [...keys].sort());
    assert.deepEqual(result.missing, []);
    for (const [k, v] of Object.entries(values)) {
      assert.deepEqual(await target.get(`mem-${k}`), v);
      assert.deepEqual(await target.get(`disk-${k}`), v);
    }
    const stats = server.stats();
    assert.ok(stats.servedFromDiskBytes > 5 * MiB, `served from disk: ${stats.servedFromDiskBytes}`);
    assert.ok(stats.servedFromMemoryBytes > 5 * MiB, `served from memory: ${stats.servedFromMemoryBytes}`);
    assert.equal(stats.valuesServed, keys.length);
  });

  it('decodes typed arrays as aligned views over the received buffer', async (t) => {
    const { source, target, server } = await pair(t);
    source.set('f', { x: new Float64Array([1.5, 2.5]), y: new Uint16Array([1, 2, 3]) });
    await new DataClient().fetch(server.address, ['f'], target);
    const got = (await target.get('f')) as { x: Float64Array; y: Uint16Array };
    assert.ok(got.x instanceof Float64Array);
    assert.equal(got.x.buffer, got.y.buffer, 'both arrays view the same received buffer');
    assert.deepEqual([...got.x], [1.5, 2.5]);
  });

  it('fetches many keys at once, split into batches by size', async (t) => {
    const { source, target, server } = await pair(t);
    const keys = Array.from({ length: 400 }, (_, i) => `k${i}`);
    for (const [i, k] of keys.entries()) source.set(k, pattern(10_000 + i, i));
    const client = new DataClient({ batchBytes: 200_000 });
    const result = await client.fetch(server.address, [...keys, 'k0', 'nope'], target);
    assert.equal(result.fetched.length, 400);
    assert.deepEqual(result.missing, ['nope']);
    assert.ok(server.stats().requests >= 20, `requests: ${server.stats().requests}`);
    for (const [i, k] of keys.entries()) assert.deepEqual(await target.get(k), pattern(10_000 + i, i));
  });

  it('skips keys the receiving store already holds', async (t) => {
    const { source, target, server } = await pair(t);
    source.set('a', 1);
    target.set('a', 2);
    const result = await new DataClient().fetch(server.address, ['a'], target);
    assert.deepEqual(result.present, ['a']);
    assert.equal(await target.get('a'), 2);
    assert.equal(server.stats().connectionsTotal, 0);
  });

  it('receives values above the threshold straight to disk without decoding', async (t) => {
    const { source, target, server } = await pair(t);
    source.set('big', pattern(3 * MiB));
    source.set('small', pattern(1000));
    const result = await new DataClient({ diskThresholdBytes: MiB }).fetch(server.address, ['big', 'small'], target);
    assert.equal(result.toDisk, 1);
    assert.equal(result.toMemory, 1);
    assert.equal(target.where('big'), 'disk');
    assert.equal(target.where('small'), 'memory');
    assert.deepEqual(await target.get('big'), pattern(3 * MiB));
  });

  it('moves a value with a frame table over 64 KiB (9,000 frames) to memory and straight to disk', async (t) => {
    const { source, target, server } = await pair(t);
    const value = Array.from({ length: 9000 }, (_, i) => Uint8Array.of(i & 0xff, 1, 2));
    source.set('many', value);
    await new DataClient().fetch(server.address, ['many'], target);
    assert.deepEqual(await target.get('many'), value);
    const onDisk = await newStore(t);
    await new DataClient({ diskThresholdBytes: 0 }).fetch(server.address, ['many'], onDisk);
    assert.equal(onDisk.where('many'), 'disk');
    assert.deepEqual(await onDisk.get('many'), value);
  });

  it('receives to disk when the receiving store is above its target', async (t) => {
    const { source, server } = await pair(t);
    const target = await newStore(t, { memoryLimit: 10 * MiB, target: 0.1 });
    target.set('ballast', pattern(2 * MiB));
    // A pinned value cannot be spilled, so the store stays above its target.
    const lease = await target.acquire(['ballast']);
    onCleanup(t, () => lease.release());
    assert.ok(target.isAboveTarget());
    source.set('v', pattern(4096));
    const result = await new DataClient().fetch(server.address, ['v'], target);
    assert.equal(result.toDisk, 1);
    assert.equal(target.where('v'), 'disk');
    assert.deepEqual(await target.get('v'), pattern(4096));
  });

  it('accepts "host:port" addresses and answers generic requests', async (t) => {
    const source = await newStore(t);
    const server = await DataServer.listen(source, { onRequest: (body) => ({ echo: body }) });
    onCleanup(t, () => server.close());
    const client = new DataClient();
    const reply = await client.request(`127.0.0.1:${server.address.port}`, { op: 'ping', n: 1 });
    assert.deepEqual(reply, { echo: { op: 'ping', n: 1 } });
  });

  it('hands a request\'s raw payload to onRequest as it arrived, bytes exact, beside its body', async (t) => {
    const source = await newStore(t);
    const server = await DataServer.listen(source, {
      onRequest: (body, payload) => ({ body, bytes: payload === undefined ? null : Buffer.concat(payload).toString('base64'), views: payload?.length ?? 0 }),
    });
    onCleanup(t, () => server.close());
    const connection = await ClientConnection.open({ host: '127.0.0.1', port: server.address.port }, { connectTimeoutMs: 5000, idleTimeoutMs: 5000 });
    onCleanup(t, () => connection.close());
    const payload = pattern(3 * 1024 * 1024 + 5);
    const reply = (await connection.request({ op: 'push', n: 2 }, payload)) as { body: unknown; bytes: string; views: number };
    assert.deepEqual(reply.body, { op: 'push', n: 2 });
    assert.equal(reply.bytes, Buffer.from(payload).toString('base64'));
    assert.ok(reply.views > 1, 'a payload of several socket reads comes as their views, not joined');
    // The same connection still answers plain requests after a raw payload.
    assert.deepEqual(await connection.request({ op: 'ping' }), { body: { op: 'ping' }, bytes: null, views: 0 });
  });
});
