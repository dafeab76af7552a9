import type { FileHandle } from 'node:fs/promises';
import { readFully } from './file-io.js';

/**
 * Reads of small fused values, coalesced per segment file. A read is issued at once when
 * its file has none in flight (no added latency for a lone reader); reads that arrive
 * while one is in flight wait for it, then go out together: sorted by offset, values that
 * sit back to back become one `readv` straight into their own buffers. Values spilled
 * together were appended together, so reading them back together (a task's inputs, a
 * reduce over a partition) costs one system call per run instead of one per value, and
 * each read through the libuv pool costs the loop time.
 *
 * A run that fails or comes back short is read again value by value, so an error reaches
 * only the values it concerns.
 *
 * One reader going through values one at a time in the order they were written gets them
 * from a read-ahead window: a lone read that starts where the previous read of its file
 * ended reads READ_AHEAD_BYTES at once, and the next reads inside that window are copies,
 * with no system call. A window only covers bytes that can no longer change (the prefix of
 * a segment whose group writes have all ended), so it is never stale.
 */

/** A run of adjacent values is cut at this many bytes... */
const RUN_BYTES = 1024 * 1024;
/** ...or this many values (Linux takes at most 1024 buffers per readv). */
const RUN_VALUES = 1024;
/** Bytes read at once by a sequential lone reader. */
const READ_AHEAD_BYTES = 256 * 1024;
/** Files whose sequential position (and window) is remembered; the oldest is forgotten first. */
const TRACKED_FILES = 16;

interface PendingRead {
  readonly offset: number;
  readonly out: Uint8Array;
  /** The file's bytes before this offset can no longer change: a window may cover them. */
  readonly finalEnd: number;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
}

/** Where the last read of a file ended, and the window read ahead from it, if any. */
interface Sequence {
  next: number;
  /** The bytes read ahead (a view of `buffer`), from `windowStart`. */
  window: Buffer | undefined;
  windowStart: number;
  /** Reused by the next window of this file. */
  buffer: Buffer | undefined;
  /** A window is being read into `buffer`. */
  filling: boolean;
}

/** The reads of one file: those waiting, and whether a group is in flight. */
class FileReads {
  waiting: PendingRead[] = [];
  busy = false;
}

export class ReadCoalescer {
  readonly #files = new Map<Promise<FileHandle>, FileReads>();
  readonly #sequences = new Map<Promise<FileHandle>, Sequence>();
  /** Reads that went out as part of a run of more than one value (diagnostics, tests). */
  coalesced = 0;
  /** System calls made for reads (runs, single reads, read-ahead windows). */
  calls = 0;
  /** Reads served from a read-ahead window, with no system call. */
  windowHits = 0;

  /**
   * Fills `out` with the bytes at `offset` of the file; the caller keeps the file open until
   * it resolves. Bytes before `finalEnd` can no longer change: read-ahead may cover them.
   */
  read(handle: Promise<FileHandle>, out: Uint8Array, offset: number, finalEnd = 0): Promise<void> {
    if (this.#fromWindow(handle, out, offset)) return Promise.resolve();
    let file = this.#files.get(handle);
    if (file === undefined) {
      file = new FileReads();
      this.#files.set(handle, file);
    }
    const waiting = file.waiting;
    const done = new Promise<void>((resolve, reject) => waiting.push({ offset, out, finalEnd, resolve, reject }));
    if (!file.busy) void this.#drain(handle, file);
    return done;
  }

  /** Forgets every window (the tier closes). */
  clear(): void {
    this.#sequences.clear();
  }

  #fromWindow(handle: Promise<FileHandle>, out: Uint8Array, offset: number): boolean {
    const seq = this.#sequences.get(handle);
    const window = seq?.window;
    if (seq === undefined || window === undefined) return false;
    const at = offset - seq.windowStart;
    if (at < 0 || at + out.byteLength > window.byteLength) return false;
    out.set(window.subarray(at, at + out.byteLength));
    seq.next = offset + out.byteLength;
    this.windowHits++;
    return true;
  }

  /** A file's sequence (made on first use; the oldest tracked file is forgotten to make room). */
  #sequence(handle: Promise<FileHandle>): Sequence {
    let seq = this.#sequences.get(handle);
    if (seq === undefined) {
      if (this.#sequences.size >= TRACKED_FILES) this.#sequences.delete(this.#sequences.keys().next().value as Promise<FileHandle>);
      seq = { next: -1, window: undefined, windowStart: 0, buffer: undefined, filling: false };
      this.#sequences.set(handle, seq);
    }
    return seq;
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
        await Promise.all(runsOf(group).map((run) => this.#readRun(key, handle, run)));
      }
    } finally {
      file.busy = false;
      this.#files.delete(key);
    }
  }

  async #readRun(key: Promise<FileHandle>, handle: FileHandle, run: PendingRead[]): Promise<void> {
    this.calls++;
    if (run.length === 1) {
      const [r] = run;
      const seq = this.#sequence(key);
      const end = r.offset + r.out.byteLength;
      // Worth a window: it continues the last read, and more final bytes follow it.
      const sequential = r.offset === seq.next && end < r.finalEnd && r.out.byteLength > 0 && r.out.byteLength < READ_AHEAD_BYTES && !seq.filling;
      seq.next = end;
      if (sequential) {
        if (await readAheadInto(handle, seq, r)) return;
        this.calls++; // the window failed or came back short: one more call for the value alone
      }
      await readAlone(handle, r);
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
    this.calls += run.length;
    await Promise.all(run.map((r) => readAlone(handle, r)));
  }
}

/** Reads one value on its own and settles it. */
function readAlone(handle: FileHandle, r: PendingRead): Promise<void> {
  return readFully(handle, r.out, 0, r.out.byteLength, r.offset).then(r.resolve, r.reject);
}

/**
 * Reads a window from `r`'s offset (up to the end of the final bytes) and serves `r` from
 * it; false when the window came back shorter than `r` or failed (the caller then reads
 * `r` alone).
 */
async function readAheadInto(handle: FileHandle, seq: Sequence, r: PendingRead): Promise<boolean> {
  // No read is served from the old window while this one fills its buffer.
  seq.window = undefined;
  seq.filling = true;
  const window = (seq.buffer ??= Buffer.allocUnsafeSlow(READ_AHEAD_BYTES));
  const length = Math.min(READ_AHEAD_BYTES, r.finalEnd - r.offset);
  let bytesRead: number;
  try {
    ({ bytesRead } = await handle.read(window, 0, length, r.offset));
  } catch {
    return false;
  } finally {
    seq.filling = false;
  }
  if (bytesRead < r.out.byteLength) return false;
  r.out.set(window.subarray(0, r.out.byteLength));
  seq.window = window.subarray(0, bytesRead);
  seq.windowStart = r.offset;
  r.resolve();
  return true;
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
