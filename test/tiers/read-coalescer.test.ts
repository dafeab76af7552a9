/** ReadCoalescer: reads of small fused values that arrive together go out as runs. */
import assert from 'node:assert/strict';
import type { FileHandle } from 'node:fs/promises';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ReadCoalescer } from '../../src/tiers/disk/read-coalescer.js';
import { noise } from './helpers.js';

interface Faults {
  /** readv fails outright. */
  failReadv?: boolean;
  /** readv stops this many bytes short. */
  shortBy?: number;
  /** read fails for reads that start at these offsets. */
  badOffsets?: Set<number>;
}

/** A FileHandle over a buffer, with the faults asked for; counts its calls. */
function fakeFile(bytes: Buffer, faults: Faults = {}): { handle: Promise<FileHandle>; calls: { read: number; readv: number } } {
  const calls = { read: 0, readv: 0 };
  const fake = {
    read(out: Uint8Array, at: number, length: number, position: number): Promise<{ bytesRead: number }> {
      calls.read++;
      if (faults.badOffsets?.has(position)) return Promise.reject(new Error(`EIO at ${position}`));
      const n = Math.max(0, Math.min(length, bytes.byteLength - position));
      out.set(bytes.subarray(position, position + n), at);
      return Promise.resolve({ bytesRead: n });
    },
    readv(buffers: Uint8Array[], position: number): Promise<{ bytesRead: number }> {
      calls.readv++;
      if (faults.failReadv === true) return Promise.reject(new Error('EIO'));
      let total = buffers.reduce((sum, b) => sum + b.byteLength, 0) - (faults.shortBy ?? 0);
      let at = position;
      for (const b of buffers) {
        const n = Math.max(0, Math.min(b.byteLength, total));
        b.set(bytes.subarray(at, at + n));
        at += n;
        total -= n;
      }
      return Promise.resolve({ bytesRead: at - position });
    },
  };
  return { handle: Promise.resolve(fake as unknown as FileHandle), calls };
}

/** Back-to-back values of the given sizes in one file: their offsets. */
function layout(sizes: readonly number[]): number[] {
  let at = 0;
  return sizes.map((n) => {
    const offset = at;
    at += n;
    return offset;
  });
}

describe('ReadCoalescer', () => {
  it('reads that arrive together go out as one readv per run of back-to-back values', async () => {
    const sizes = Array.from({ length: 200 }, (_, i) => 100 + i);
    const offsets = layout(sizes);
    const file = noise(offsets[199] + sizes[199]);
    const { handle, calls } = fakeFile(file);
    const reads = new ReadCoalescer();
    const outs = sizes.map((n) => Buffer.alloc(n));
    await Promise.all(outs.map((out, i) => reads.read(handle, out, offsets[i])));
    outs.forEach((out, i) => assert.ok(out.equals(file.subarray(offsets[i], offsets[i] + sizes[i])), `value ${i}`));
    // The first read goes at once, alone; the 199 that waited for it are one run.
    assert.deepEqual(calls, { read: 1, readv: 1 });
    assert.equal(reads.coalesced, 199);
  });

  it('a lone read goes out at once, as a plain read', async () => {
    const file = noise(10_000);
    const { handle, calls } = fakeFile(file);
    const out = Buffer.alloc(500);
    await new ReadCoalescer().read(handle, out, 1234);
    assert.ok(out.equals(file.subarray(1234, 1734)));
    assert.deepEqual(calls, { read: 1, readv: 0 });
  });

  it('a failed run is read again value by value: only the bad value fails', async () => {
    const sizes = [300, 300, 300, 300, 300];
    const offsets = layout(sizes);
    const file = noise(1500);
    const { handle, calls } = fakeFile(file, { failReadv: true, badOffsets: new Set([offsets[3]]) });
    const reads = new ReadCoalescer();
    const outs = sizes.map((n) => Buffer.alloc(n));
    const results = await Promise.allSettled(outs.map((out, i) => reads.read(handle, out, offsets[i])));
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
    );
    for (const i of [0, 1, 2, 4]) assert.ok(outs[i].equals(file.subarray(offsets[i], offsets[i] + 300)));
    assert.equal(calls.readv, 1);
    assert.equal(reads.calls, calls.read + calls.readv, 'every call counted, the value-by-value ones too');
  });

  it('a short run is read again value by value', async () => {
    const sizes = [1000, 1000, 1000];
    const offsets = layout(sizes);
    const file = noise(3000);
    const { handle, calls } = fakeFile(file, { shortBy: 700 });
    const reads = new ReadCoalescer();
    const outs = sizes.map((n) => Buffer.alloc(n));
    await Promise.all(outs.map((out, i) => reads.read(handle, out, offsets[i])));
    outs.forEach((out, i) => assert.ok(out.equals(file.subarray(offsets[i], offsets[i] + 1000)), `value ${i}`));
    assert.equal(reads.coalesced, 0);
    assert.equal(reads.calls, calls.read + calls.readv, 'every call counted, the value-by-value ones too');
  });

  it('a file that failed to open fails its reads, and the next reads try again', async () => {
    const reads = new ReadCoalescer();
    const bad = Promise.reject(new Error('EMFILE'));
    bad.catch(() => undefined);
    await assert.rejects(reads.read(bad, Buffer.alloc(10), 0), /EMFILE/);
    const file = noise(100);
    const { handle } = fakeFile(file);
    const out = Buffer.alloc(10);
    await reads.read(handle, out, 20);
    assert.ok(out.equals(file.subarray(20, 30)));
  });

  it('one reader going through values in order gets them from a read-ahead window', async () => {
    const sizes = Array.from({ length: 400 }, (_, i) => 2000 + (i % 5) * 700);
    const offsets = layout(sizes);
    const file = noise(offsets[399] + sizes[399]);
    const { handle, calls } = fakeFile(file);
    const reads = new ReadCoalescer();
    for (const [i, n] of sizes.entries()) {
      const out = Buffer.alloc(n);
      await reads.read(handle, out, offsets[i], file.byteLength);
      assert.ok(out.equals(file.subarray(offsets[i], offsets[i] + n)), `value ${i}`);
    }
    // ~1.4 MB in 256 KiB windows: a handful of calls, every other read a copy.
    assert.ok(calls.read <= 10, `${calls.read} reads for ${sizes.length} values`);
    assert.equal(reads.windowHits, sizes.length - calls.read);
  });

  it('a window never covers bytes that may still change, nor reads out of order', async () => {
    const file = noise(100_000);
    const { handle, calls } = fakeFile(file);
    const reads = new ReadCoalescer();
    const read = async (offset: number, n: number, finalEnd: number): Promise<Buffer> => {
      const out = Buffer.alloc(n);
      await reads.read(handle, out, offset, finalEnd);
      return out;
    };
    // Only the first 10,000 bytes are final: the window stops there.
    await read(0, 1000, 10_000);
    await read(1000, 1000, 10_000);
    assert.equal(reads.windowHits, 0);
    // Bytes past 10,000 land later (another append); a read of them sees the new bytes.
    file.fill(7, 10_000, 20_000);
    assert.ok((await read(10_000, 1000, 20_000)).equals(Buffer.alloc(1000, 7)));
    assert.ok((await read(2000, 1000, 20_000)).equals(file.subarray(2000, 3000)), 'inside the window');
    assert.equal(reads.windowHits, 1);
    // Out of order: no window is read.
    const before = calls.read;
    await read(50_000, 100, 100_000);
    await read(40_000, 100, 100_000);
    assert.equal(calls.read - before, 2);
  });

  it('any mix of reads (gaps, overlaps, repeats, empty values, several files) returns exact bytes', async () => {
    const file = noise(64 * 1024);
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ file: fc.nat(2), offset: fc.nat(60_000), length: fc.nat(3000), waitFirst: fc.boolean() }), { minLength: 1, maxLength: 60 }),
        async (wanted) => {
          const files = [fakeFile(file), fakeFile(file), fakeFile(file)];
          const reads = new ReadCoalescer();
          const outs = wanted.map((w) => Buffer.alloc(w.length));
          const pending: Promise<void>[] = [];
          for (const [i, w] of wanted.entries()) {
            // Some reads start on a later turn, while others are in flight.
            if (w.waitFirst) await Promise.resolve();
            // Half of the files allow read-ahead over all their bytes (they never change here).
            pending.push(reads.read(files[w.file].handle, outs[i], w.offset, w.file === 0 ? 0 : file.byteLength));
          }
          await Promise.all(pending);
          wanted.forEach((w, i) => assert.ok(outs[i].equals(file.subarray(w.offset, w.offset + w.length)), `read ${i}`));
          assert.ok(reads.calls <= wanted.length);
        },
      ),
      { numRuns: 150 },
    );
  });
});
