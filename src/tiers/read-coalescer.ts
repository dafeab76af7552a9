import type { FileHandle } from 'node:fs/promises';
import { readFully } from './file-io.js';

/**
 * Reads of small fused values, coalesced per segment file. A read is issued at once when
 * its file has none in flight (no added latency for a lone reader); reads that arrive
 * while one is in flight wait for it, then go out together: sorted by offset, values that
 * sit back to back become one `readv` straight into their own buffers. Values spilled
 * together were appended together, so reading them back together (a task's inputs, a
 * reduce over a partition) costs one system call per run instead of one per value: on
 * this 2-core machine each read through the libuv pool cost ~17 µs of loop time.
 *
 * A run that fails or comes back short is read again value by value, so an error reaches
 * only the values it concerns.
 */

/** A run of adjacent values is cut at this many bytes... */
const RUN_BYTES = 1024 * 1024;
/** ...or this many values (Linux takes at most 1024 buffers per readv). */
const RUN_VALUES = 1024;

interface PendingRead {
  readonly offset: number;
  readonly out: Uint8Array;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
}

/** The reads of one file: those waiting, and whether a group is in flight. */
class FileReads {
  waiting: PendingRead[] = [];
  busy = false;
}

export class ReadCoalescer {
  readonly #files = new Map<Promise<FileHandle>, FileReads>();
  /** Reads that went out as part of a run of more than one value (diagnostics, tests). */
  coalesced = 0;
  /** System calls made for reads (runs, and single reads). */
  calls = 0;

  /** Fills `out` with the bytes at `offset` of the file; the caller keeps the file open until it resolves. */
  read(handle: Promise<FileHandle>, out: Uint8Array, offset: number): Promise<void> {
    let file = this.#files.get(handle);
    if (file === undefined) {
      file = new FileReads();
      this.#files.set(handle, file);
    }
    const waiting = file.waiting;
    const done = new Promise<void>((resolve, reject) => waiting.push({ offset, out, resolve, reject }));
    if (!file.busy) void this.#drain(handle, file);
    return done;
  }

  async #drain(key: Promise<FileHandle>, file: FileReads): Promise<void> {
    file.busy = true;
    try {
      while (file.waiting.length > 0) {
        const group = file.waiting;
        file.waiting = [];
        let handle: FileHandle;
        try {
          handle = await key;
        } catch (err) {
          for (const r of group) r.reject(err);
          continue;
        }
        await Promise.all(runsOf(group).map((run) => this.#readRun(handle, run)));
      }
    } finally {
      file.busy = false;
      this.#files.delete(key);
    }
  }

  async #readRun(handle: FileHandle, run: PendingRead[]): Promise<void> {
    this.calls++;
    if (run.length === 1) {
      const [r] = run;
      await readFully(handle, r.out, 0, r.out.byteLength, r.offset).then(r.resolve, r.reject);
      return;
    }
    let total = 0;
    for (const r of run) total += r.out.byteLength;
    let complete = false;
    try {
      const { bytesRead } = await handle.readv(
        run.map((r) => r.out),
        run[0].offset,
      );
      complete = bytesRead === total;
    } catch {
      // Read again one by one below: only the values the error concerns fail.
    }
    if (complete) {
      this.coalesced += run.length;
      for (const r of run) r.resolve();
      return;
    }
    await Promise.all(run.map((r) => readFully(handle, r.out, 0, r.out.byteLength, r.offset).then(r.resolve, r.reject)));
  }
}

/** Sorts reads by offset and cuts them into runs of back-to-back values. */
function runsOf(reads: PendingRead[]): PendingRead[][] {
  if (reads.length === 1) return [reads];
  reads.sort((a, b) => a.offset - b.offset);
  const runs: PendingRead[][] = [];
  let run: PendingRead[] = [reads[0]];
  let end = reads[0].offset + reads[0].out.byteLength;
  let bytes = reads[0].out.byteLength;
  for (let i = 1; i < reads.length; i++) {
    const r = reads[i];
    const n = r.out.byteLength;
    if (r.offset === end && n > 0 && bytes + n <= RUN_BYTES && run.length < RUN_VALUES) {
      run.push(r);
      bytes += n;
    } else {
      runs.push(run);
      run = [r];
      bytes = n;
    }
    end = r.offset + n;
  }
  runs.push(run);
  return runs;
}
