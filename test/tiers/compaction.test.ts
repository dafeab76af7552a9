/** Compaction of fused segments when group writes land out of order. */
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { it } from 'node:test';
import { DiskTier } from '../../src/tiers/disk/disk-tier.js';
import { onCleanup } from '../helpers/cleanup.js';
import { noise, rawSource, tempDir } from './helpers.js';

const KiB = 1024;

type Write = (this: fsp.FileHandle, ...args: unknown[]) => Promise<unknown>;

/**
 * Holds the first plain write at `position` on any FileHandle until `release`, so a later
 * group write of the same segment lands first. Patches the shared FileHandle prototype
 * (a test seam: the tier opens its own files); `restore` puts it back.
 */
async function holdWriteAt(dir: string, position: number) {
  const probe = await fsp.open(path.join(dir, 'probe'), 'w');
  const proto = Object.getPrototypeOf(probe) as { write: Write };
  await probe.close();
  const original = proto.write;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let started!: () => void;
  const held = new Promise<void>((resolve) => (started = resolve));
  let armed = true;
  proto.write = async function (this: fsp.FileHandle, ...args: unknown[]) {
    if (armed && args[3] === position) {
      armed = false;
      started();
      await released;
    }
    return original.apply(this, args);
  };
  return { held, release, restore: () => void (proto.write = original) };
}

// A timeout, so that a write path that no longer makes this plain write fails the test
// instead of leaving it waiting for the hold forever.
it('an empty value whose group lands after the next value at its offset: compaction moves both intact', { timeout: 30_000 }, async (t) => {
  const parent = await tempDir(t);
  const hold = await holdWriteAt(parent, 0);
  // One lane: the two groups must share the segment.
  const tier = new DiskTier({ directory: parent, smallValueBytes: 2 * KiB, segmentBytes: 3 * KiB, compactDeadFraction: 0.5, segmentLanes: 1 });
  onCleanup(t, () => tier.close());
  onCleanup(t, () => hold.restore());
  await tier.open();
  const x = noise(1000);
  const r = noise(500);
  const v = noise(1900);
  // One group: x at 0, then the empty value at 1000; its write is held.
  const first = tier.writeMany?.([
    { id: 0, bytes: [x], byteLength: x.byteLength },
    { id: 1, bytes: [], byteLength: 0 },
  ]);
  await hold.held;
  // A second group: r, also at 1000, lands first, so the segment lists r before the empty value.
  await tier.write(2, rawSource(r), r.byteLength);
  hold.release();
  assert.deepEqual((await first)?.map((result) => result.status), ['fulfilled', 'fulfilled']);
  // x dead (1000 of 1500 bytes), then v does not fit: the segment is sealed and compacted.
  await tier.delete(0);
  await tier.write(3, rawSource(v), v.byteLength);
  await tier.idle();
  assert.equal(tier.stats().details.compactions, 1, 'the segment was compacted');
  assert.equal(tier.stats().details.compactionErrors, 0);
  assert.ok(Buffer.from(await tier.read(2)).equals(r), 'r keeps its bytes after the move');
  assert.equal((await tier.read(1)).byteLength, 0);
  assert.ok(Buffer.from(await tier.read(3)).equals(v), 'v is not overlapped by r');
});
