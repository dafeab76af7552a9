/**
 * `npm run bench -- large-values [case...]`: a by-hand check (not a benchmark, too heavy
 * for the tests) that values past 4 GiB are never cut. Cases (all by default, one at a
 * time; each needs up to 9 GiB of RAM):
 *   out      a task returns a Float64Array of 4 GiB + 8 MiB: it arrives whole
 *   in       the same array as a task's input: the thread sees it whole
 *   refused  where a Buffer cannot hold it (Node 20: buffer.constants.MAX_LENGTH is 4 GiB) the
 *            store keeps it in memory with a CodecError (too long to read back); on Node 22
 *            and later it is spilled and read back from disk whole
 *   largest  the largest value that encodes (4 GiB encoded) is spilled and read back from disk
 * Each line ends in "ok" or "WRONG". On Node 20 before the fix, `out` gave 8 MiB.
 */
import { constants } from 'node:buffer';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DiskTier, SpillStore } from '../src/index.js';
import { Executor } from '../src/worker/executor.js';

const OVER_4GIB = (2 ** 32 + 2 ** 23) / 8;

/** Task: a Float64Array of `n` with k at element k of the last 16, 42 at 0 (the rest untouched). */
export function makeLarge(n: number): Float64Array {
  const a = new Float64Array(n);
  a[0] = 42;
  for (let i = n - 16; i < n; i++) a[i] = i;
  return a;
}

/** Task: what the thread sees of its input. */
export function inspectLarge(a: Float64Array): { length: number; ok: boolean } {
  return { length: a.length, ok: lookRight(a, OVER_4GIB) };
}

function lookRight(a: Float64Array, n: number): boolean {
  if (a.length !== n || a[0] !== 42) return false;
  for (let i = n - 16; i < n; i++) if (a[i] !== i) return false;
  return true;
}

function report(name: string, ok: boolean, detail: string): void {
  console.log(`${name}: ${detail} ${ok ? 'ok' : 'WRONG'}`);
}

async function throughExecutor(name: 'out' | 'in'): Promise<void> {
  const executor = new Executor(1);
  const module = import.meta.url;
  try {
    if (name === 'out') {
      const r = await executor.run({ module, name: 'makeLarge' }, [OVER_4GIB]);
      if (!r.ok) return report(name, false, `${r.error.name}: ${r.error.message}`);
      const a = r.value as Float64Array;
      report(name, lookRight(a, OVER_4GIB), `result of ${a.byteLength} bytes (${OVER_4GIB * 8} made)`);
    } else {
      const r = await executor.run({ module, name: 'inspectLarge' }, [makeLarge(OVER_4GIB)]);
      if (!r.ok) return report(name, false, `${r.error.name}: ${r.error.message}`);
      const seen = r.value as { length: number; ok: boolean };
      report(name, seen.ok, `the thread saw ${seen.length * 8} bytes of ${OVER_4GIB * 8}`);
    }
  } finally {
    await executor.close();
  }
}

async function throughStore(name: 'refused' | 'largest'): Promise<void> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'spillway-large-'));
  const store = await SpillStore.open({ memoryLimit: 64 * 2 ** 20, monitorIntervalMs: 0, tiers: [new DiskTier({ directory: dir })] });
  const errors: Error[] = [];
  store.on('error', (err: Error) => errors.push(err));
  const n = name === 'refused' ? OVER_4GIB : (2 ** 32 - 40) / 8;
  try {
    (() => store.set('big', makeLarge(n)))(); // no reference kept here: read back from disk if spilled
    await store.evict();
    await store.flush();
    const gc = (globalThis as { gc?: () => void }).gc;
    for (let i = 0; i < 5; i++) {
      gc?.();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const a = (await store.get('big')) as Float64Array;
    const reads = store.stats().tiers[0].reads;
    const codes = errors.map((e) => (e as { code?: string }).code ?? e.name);
    // Past what one Buffer can hold, a value could not be read back: it must stay in memory.
    const readable = n * 8 + 64 <= constants.MAX_LENGTH;
    const expected = readable ? reads === 1 && codes.length === 0 : reads === 0 && codes.includes('SPW_ERR_CODEC');
    report(name, expected && lookRight(a, n), `${a.byteLength} bytes back, ${reads} read(s) from disk, errors: ${errors.map(String).join('; ') || 'none'}`);
  } finally {
    await store.close();
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

export default async function main(args: string[]): Promise<void> {
  const cases = args.length > 0 ? args : ['out', 'in', 'refused', 'largest'];
  for (const name of cases) {
    if (name === 'out' || name === 'in') await throughExecutor(name);
    else if (name === 'refused' || name === 'largest') await throughStore(name);
    else throw new Error(`unknown case ${name}`);
  }
}
