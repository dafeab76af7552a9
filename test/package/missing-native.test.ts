/**
 * The package installed without its native bindings (lz4-napi, @node-rs/xxhash), as on a
 * platform they do not build for: importing it works, checksums fall back to the portable
 * XXH64, and the first use of lz4 fails with NativeModuleError.
 */
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { tempDir } from '../helpers/temp-dir.js';
import { repoRoot } from '../helpers/suite.js';
import { assertBuilt, packageJson, runScript } from './built.js';

const NATIVE = new Set(['lz4-napi', '@node-rs/xxhash']);

/** A node_modules with the built package and every dependency but the native ones. */
async function installWithoutNatives(dir: string): Promise<void> {
  const modules = path.join(dir, 'node_modules');
  const self = path.join(modules, 'spillway');
  await fsp.mkdir(self, { recursive: true });
  await fsp.copyFile(path.join(repoRoot, 'package.json'), path.join(self, 'package.json'));
  // A copy, not a link: Node resolves a module's imports from its real path.
  await fsp.cp(path.join(repoRoot, 'dist'), path.join(self, 'dist'), { recursive: true });
  const { dependencies } = JSON.parse(await fsp.readFile(path.join(repoRoot, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  for (const name of Object.keys(dependencies)) {
    if (NATIVE.has(name)) continue;
    await fsp.mkdir(path.dirname(path.join(modules, name)), { recursive: true });
    await fsp.symlink(path.join(repoRoot, 'node_modules', name), path.join(modules, name), 'dir');
  }
}

interface Outcome {
  hidden: string[];
  roundTrip: boolean;
  spilled: number;
  readBack: boolean;
  compressedMemory: [string, string, boolean];
  lz4Disk: [string, string, boolean];
}

test('without lz4-napi and @node-rs/xxhash: import works, checksums fall back, lz4 fails with NativeModuleError', async (t) => {
  assertBuilt();
  assert.ok(packageJson.sideEffects === false);
  const dir = await tempDir(t, 'spw-no-native-');
  await installWithoutNatives(dir);
  const script = `
    import { createRequire } from 'node:module';
    const s = await import('spillway');
    const transfer = await import('spillway/transfer');
    const require = createRequire(process.cwd() + '/node_modules/spillway/');
    const hidden = ${JSON.stringify([...NATIVE])}.filter((name) => { try { require.resolve(name); return false; } catch { return true; } });
    const failure = async (open) => { try { await open(); return ['opened', '', false]; } catch (err) { return [err.name, err.code, err instanceof s.NativeModuleError]; } };
    const value = { rows: [1, 2, 3], payload: new Float64Array(4096).fill(0.5) };
    const roundTrip = JSON.stringify(await transfer.decodeVerified(await transfer.encodeToBuffer(value))) === JSON.stringify(value);
    const store = await s.SpillStore.open({ memoryLimit: '64 MiB', directory: ${JSON.stringify(dir)} });
    for (let i = 0; i < 4; i++) store.set('k' + i, new Float64Array(256 * 1024).fill(i));
    await store.evict();
    const spilled = store.stats().disk.count;
    const back = await store.get('k1');
    const readBack = back.length === 256 * 1024 && back[7] === 1;
    await store.close();
    const compressedMemory = await failure(() => new s.CompressedMemoryTier({ capacity: 1024 * 1024 }).open());
    const disk = new s.DiskTier({ directory: ${JSON.stringify(dir)}, compression: 'lz4' });
    const lz4Disk = await failure(() => disk.open());
    process.stdout.write(JSON.stringify({ hidden, roundTrip, spilled, readBack, compressedMemory, lz4Disk }));
  `;
  const out = await runScript<Outcome>(script, dir);
  assert.deepEqual(out.hidden, [...NATIVE], 'the bindings cannot be resolved from the installed package');
  assert.equal(out.roundTrip, true, 'encode and verified decode work with the portable checksum');
  assert.equal(out.spilled, 4, 'every value was spilled');
  assert.equal(out.readBack, true, 'a spilled value comes back');
  assert.deepEqual(out.compressedMemory, ['NativeModuleError', 'SPW_ERR_NATIVE_MODULE', true]);
  assert.deepEqual(out.lz4Disk, ['NativeModuleError', 'SPW_ERR_NATIVE_MODULE', true]);
});
