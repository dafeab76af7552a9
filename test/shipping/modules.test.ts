/** Code shipping's parts without a cluster: the scheduler's registry, the client's graph rewriting. */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { tempDir } from '../helpers/temp-dir.js';
import type { ForgetModuleParams, ShipModuleParams, UploadModuleParams } from '../../src/cluster/protocol.js';
import { GraphError, InvalidArgumentError } from '../../src/errors.js';
import { shuffle } from '../../src/shuffle/protocol.js';
import { moduleAddress } from '../../src/shipping/address.js';
import { ModuleShipper } from '../../src/client/modules.js';
import { ModuleRefusedError, UnknownModuleError } from '../../src/shipping/errors.js';
import { ModuleRegistry } from '../../src/scheduler/modules.js';

function upload(url: string, source: string): UploadModuleParams {
  return { url, module: moduleAddress(source), source };
}

test('the registry keeps modules within its byte limit, least recently used dropped first, and tells the workers', () => {
  const shipped: ShipModuleParams[] = [];
  const forgotten: ForgetModuleParams[] = [];
  const registry = new ModuleRegistry({
    limitBytes: 100,
    allowModules: ['file:///jobs/'],
    outbox: { ship: (p) => (shipped.push(p), 2), forget: (p) => forgotten.push(p) },
  });
  const a = upload('file:///jobs/a.js', 'a'.repeat(40));
  const b = upload('file:///jobs/b.js', 'b'.repeat(40));
  const c = upload('file:///jobs/c.js', 'c'.repeat(40));
  assert.deepEqual(registry.upload(a), { module: a.module, workers: 2 });
  registry.upload(b);
  assert.deepEqual(registry.upload(a), { module: a.module, workers: 0 }, 'held already: not sent again, but used');
  registry.upload(c);
  assert.deepEqual(forgotten, [{ module: b.module }], 'b was the least recently used');
  assert.equal(registry.bytes, 80);
  assert.deepEqual([...registry.all()].map((m) => m.url), ['file:///jobs/a.js', 'file:///jobs/c.js']);
  assert.equal(registry.origin(a.module), 'file:///jobs/a.js');
  assert.deepEqual(registry.named({ module: a.module, name: 'f' }), { module: 'file:///jobs/a.js', name: 'f' });
  assert.deepEqual(registry.named({ module: 'node:zlib', name: 'f' }), { module: 'node:zlib', name: 'f' });
  assert.equal(shipped.length, 3);

  registry.checkGraph([{ key: 'x', spec: { fn: { module: a.module, name: 'f' } } }, { key: 'y', spec: { fn: { module: 'node:zlib', name: 'f' } } }]);
  assert.throws(() => registry.checkGraph([{ key: 'x', spec: { fn: { module: b.module, name: 'f' } } }]), UnknownModuleError);
  assert.throws(() => registry.upload(upload('file:///elsewhere/d.js', 'd')), ModuleRefusedError);
  assert.throws(() => registry.upload({ ...upload('file:///jobs/e.js', 'e'), source: 'not e' }), /not the sha256 of the source/);
  assert.throws(() => registry.upload(upload('file:///jobs/big.js', 'x'.repeat(101))), /over the scheduler's module cache limit/);
  assert.throws(() => registry.upload({ url: 'https://example.invalid/x.js', module: 'x', source: '' }), InvalidArgumentError);
});

test('the client bundles the modules a graph names, shuffle split and combine included, and rewrites the graph to their addresses', async (t) => {
  const dir = await tempDir(t, 'spillway-ship-unit-');
  const url = pathToFileURL(path.join(dir, 'jobs.ts')).href;
  await writeFile(path.join(dir, 'jobs.ts'), 'export const load = (n: number): number[] => [n];\nexport function split(x: number[], p: number): number[][] { return Array.from({ length: p }, () => x); }\n');
  const uploads: UploadModuleParams[] = [];
  const shipper = new ModuleShipper(async (p) => (uploads.push(p), { module: p.module, workers: 1 }), { auto: true });
  const nodes = shuffle({ id: 's', inputs: ['in-0'], split: { module: url, name: 'split' } });
  const graph = { 'in-0': { fn: { module: url, name: 'load' }, args: [1] }, other: { fn: { module: 'node:zlib', name: 'crc32' } }, ...nodes.graph };
  const copy = structuredClone(graph);
  const prepared = await shipper.prepare(graph);
  assert.deepEqual(graph, copy, 'the graph given is left as it is');
  assert.equal(uploads.length, 1, 'one module, uploaded once');
  const address = uploads[0].module;
  assert.equal(prepared['in-0'].fn.module, address);
  assert.equal(prepared.other, graph.other, 'a task naming no shipped module is shared');
  assert.equal((prepared['s-transfer-0'].args?.[1] as { split: { module: string } }).split.module, address);
  await shipper.prepare(graph);
  assert.equal(uploads.length, 1, 'an unchanged module is not uploaded again');
  await assert.rejects(shipper.prepare({ x: { fn: { module: url, name: 'nope' } } }), (err: unknown) => err instanceof GraphError && /jobs\.ts has no exported function "nope"/.test(err.message));
  const off = new ModuleShipper(async (p) => ({ module: p.module, workers: 0 }), { auto: false });
  assert.equal(await off.prepare(graph), graph, 'automatic shipping off: the graph is left alone');
});
