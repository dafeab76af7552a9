import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { decodeVerified, encodeToBuffer, nativeChecksum } from '../../src/codec/index.js';
import { sampleValues } from './portable-values.js';
import { nodeImports, suiteModule } from '../helpers/suite.js';

const codec = suiteModule('src/codec/index');
const samples = suiteModule('test/codec/portable-values');

test('SPILLWAY_CHECKSUM=portable: the portable XXH64 writes the very bytes the native one does', async () => {
  assert.equal(nativeChecksum(), true, 'this side uses the native binding');
  const script = `
    import { encodeToBuffer, nativeChecksum } from ${JSON.stringify(codec)};
    import { sampleValues } from ${JSON.stringify(samples)};
    const out = [];
    for (const v of sampleValues()) out.push((await encodeToBuffer(v)).toString('base64'));
    process.stdout.write(JSON.stringify({ nativeChecksum: nativeChecksum(), out }));
  `;
  const { stdout } = await promisify(execFile)(process.execPath, [...nodeImports, '--input-type=module', '-e', script], {
    env: { ...process.env, SPILLWAY_CHECKSUM: 'portable' },
    maxBuffer: 64 * 1024 * 1024,
  });
  const child = JSON.parse(stdout) as { nativeChecksum: boolean; out: string[] };
  assert.equal(child.nativeChecksum, false, 'the child used the portable implementation');
  const values = sampleValues();
  assert.equal(child.out.length, values.length);
  for (const [i, value] of values.entries()) {
    const fromPortable = Buffer.from(child.out[i], 'base64');
    assert.ok(fromPortable.equals(await encodeToBuffer(value)), `value ${i}: same bytes`);
    assert.deepEqual(await decodeVerified(fromPortable), value);
  }
});
