import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ThrottledRemoteTier } from '../../examples/throttled-remote-tier.js';
import { InvalidArgumentError, type Tier } from '../../src/index.js';
import { tierContract } from '../../src/testing/index.js';
import { cleanupScope, onCleanup } from '../helpers/cleanup.js';
import { noise, rawSource, tempDir } from './helpers.js';

const MiB = 1024 * 1024;

tierContract('example ThrottledRemoteTier', async () => {
  const scope = cleanupScope();
  const parent = await tempDir(scope, 'spw-remote-');
  return {
    tier: new ThrottledRemoteTier({ directory: parent, bytesPerSecond: 2000 * MiB, latencyMs: 0 }),
    parents: [parent],
    exactBytes: true,
    cleanup: scope.end,
  };
});

describe('example ThrottledRemoteTier', () => {
  it('is a Tier through the public API and throttles bandwidth', async (t) => {
    const tier: Tier = new ThrottledRemoteTier({ directory: await tempDir(t, 'spw-remote-'), bytesPerSecond: 20 * MiB, latencyMs: 1 });
    await tier.open();
    onCleanup(t, () => tier.close());
    const bytes = noise(4 * MiB);
    const started = performance.now();
    await tier.write(1, rawSource(bytes), bytes.byteLength);
    const seconds = (performance.now() - started) / 1000;
    // 4 MiB at 20 MiB/s books 200 ms of the link.
    assert.ok(seconds >= 0.15, `write took ${seconds.toFixed(3)} s`);
    assert.ok(Buffer.from(await tier.read(1)).equals(bytes));
  });

  it('rejects a misconfiguration', () => {
    assert.throws(() => new ThrottledRemoteTier({ directory: '', bytesPerSecond: 1 }), InvalidArgumentError);
    assert.throws(() => new ThrottledRemoteTier({ directory: '/tmp', bytesPerSecond: 0 }), InvalidArgumentError);
    assert.throws(() => new ThrottledRemoteTier({ directory: '/tmp', bytesPerSecond: 1, capacity: Number.NaN }), InvalidArgumentError);
  });
});
