import type { FileHandle } from 'node:fs/promises';
import { TierShortWriteError, TierTruncatedError } from '../../errors.js';

/**
 * writev at `position`, looping on short writes (pwritev may write less than asked).
 * `byteLength`, when the caller knows the pieces' total, skips the pass that drops empty
 * pieces and joins touching ones (`coalesce`): writev takes them as they are.
 */
export async function writeFully(handle: FileHandle, batch: readonly Uint8Array[], position: number, byteLength?: number): Promise<void> {
  let { pieces, byteLength: wanted } = byteLength === undefined ? coalesce(batch) : { pieces: batch, byteLength };
  while (pieces.length > 0) {
    const { bytesWritten } =
      pieces.length === 1 ? await handle.write(pieces[0], 0, wanted, position) : await handle.writev(pieces, position);
    if (bytesWritten === wanted) return;
    if (bytesWritten <= 0) throw new TierShortWriteError();
    position += bytesWritten;
    wanted -= bytesWritten;
    let skip = bytesWritten;
    const rest: Uint8Array[] = [];
    for (const p of pieces) {
      if (skip >= p.byteLength) {
        skip -= p.byteLength;
        continue;
      }
      rest.push(skip > 0 ? p.subarray(skip) : p);
      skip = 0;
    }
    pieces = rest;
  }
}

/**
 * Drops empty pieces and joins neighbours that are adjacent views of one buffer (a batch of
 * small values laid out in one buffer becomes one piece, so one plain write); counts the
 * bytes in the same pass (a pass over a large group's pieces costs more than its sums).
 * When there is nothing to drop or join (a packed batch: each value's own memory between
 * runs of a side buffer), the batch itself is returned: no array of thousands of pieces
 * made again for every write.
 */
export function coalesce(batch: readonly Uint8Array[]): { pieces: readonly Uint8Array[]; byteLength: number } {
  let byteLength = 0;
  let previous: Uint8Array | undefined;
  for (const piece of batch) {
    if (piece.byteLength === 0 || (previous !== undefined && adjacent(previous, piece))) return joined(batch);
    byteLength += piece.byteLength;
    previous = piece;
  }
  return { pieces: batch, byteLength };
}

function adjacent(a: Uint8Array, b: Uint8Array): boolean {
  return a.buffer === b.buffer && a.byteOffset + a.byteLength === b.byteOffset;
}

/** The batch with empty pieces dropped and adjacent views joined, and its bytes counted. */
function joined(batch: readonly Uint8Array[]): { pieces: Uint8Array[]; byteLength: number } {
  const out: Uint8Array[] = [];
  let byteLength = 0;
  let first: Uint8Array | undefined;
  let end = 0;
  let extended = false;
  const close = (): void => {
    if (first === undefined) return;
    out.push(extended ? new Uint8Array(first.buffer, first.byteOffset, end - first.byteOffset) : first);
  };
  for (const piece of batch) {
    if (piece.byteLength === 0) continue;
    byteLength += piece.byteLength;
    if (first !== undefined && piece.buffer === first.buffer && piece.byteOffset === end) {
      extended = true;
    } else {
      close();
      first = piece;
      extended = false;
    }
    end = piece.byteOffset + piece.byteLength;
  }
  close();
  return { pieces: out, byteLength };
}

/** Reads exactly `length` bytes at `position` into `out` at `at`; a short file is an error. */
export async function readFully(handle: FileHandle, out: Uint8Array, at: number, length: number, position: number): Promise<void> {
  let done = 0;
  while (done < length) {
    const { bytesRead } = await handle.read(out, at + done, length - done, position + done);
    if (bytesRead === 0) {
      throw new TierTruncatedError(`stored bytes end at ${position + done}, expected ${position + length}`);
    }
    done += bytesRead;
  }
}

/** Node reports errno failures with `code`; a file already gone is not a failure when removing. */
export function ignoreMissing(err: NodeJS.ErrnoException): void {
  if (err.code !== 'ENOENT') throw err;
}
