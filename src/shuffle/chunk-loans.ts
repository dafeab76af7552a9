/**
 * An output's chunks on their way to the thread that assembles it. The unpack is the
 * chunks' last reader, so it takes them out of the store (SpillStore.take) rather than
 * reading them: one spilled is read straight into a pooled buffer, one in memory comes as
 * it is. Buffers the worker holds alone (the receiver's pooled chunks, the pooled read
 * buffers) are lent to the thread, moved rather than copied, and come back to the pool
 * with the thread's result; nothing else can see them meanwhile.
 */
import type { SizedBufferPool } from '../runtime/sized-buffer-pool.js';
import type { SpillStore } from '../store/spill-store.js';
import type { AssembleChunk } from './thread-tasks.js';

export interface ChunkLoan {
  chunks: AssembleChunk[];
  /** Buffers moved to the thread, to give back to the pool when it hands them back. */
  lend: ArrayBuffer[];
  /** Bytes of the chunks. */
  bytes: number;
}

/**
 * Reads in flight at once when taking an output's chunks: one read at a time leaves the
 * disk and libuv's threads idle between a read's end and the next one's start, and an
 * output's chunks are dozens of reads of a few hundred KiB each.
 */
export const TAKE_CONCURRENCY = 8;

/**
 * Takes the chunks under `keys` out of the store, several at a time, in order. On a
 * failure the reads under way finish, the buffers taken go back to the pool, and the keys
 * not taken stay in the store (the caller deletes them).
 */
export async function takeChunks(store: Pick<SpillStore, 'take'>, keys: readonly string[], pool: SizedBufferPool): Promise<ChunkLoan> {
  const slots: (AssembleChunk | undefined)[] = new Array(keys.length);
  const lend: ArrayBuffer[] = [];
  let bytes = 0;
  let next = 0;
  let failure: { err: unknown } | undefined;
  const reader = async (): Promise<void> => {
    while (failure === undefined && next < keys.length) {
      const i = next++;
      try {
        const taken = await store.take(keys[i], (n) => pool.take(n));
        if ('encoded' in taken) {
          slots[i] = { encoded: taken.encoded };
          lend.push(taken.encoded.buffer as ArrayBuffer);
          bytes += taken.encoded.byteLength;
          continue;
        }
        const chunk = taken.value as Uint8Array;
        slots[i] = chunk;
        bytes += chunk.byteLength;
        // A chunk the receiver laid out in a pooled buffer: the store held it alone, and no one else asks for shuffle keys.
        if (taken.alone && pool.made(chunk.buffer)) lend.push(chunk.buffer as ArrayBuffer);
      } catch (err) {
        failure ??= { err };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(TAKE_CONCURRENCY, keys.length) }, reader));
  if (failure !== undefined) {
    giveBack(pool, lend);
    throw failure.err;
  }
  return { chunks: slots as AssembleChunk[], lend, bytes };
}

/** Buffers back from the thread (or never sent) return to the pool. */
export function giveBack(pool: SizedBufferPool, buffers: readonly ArrayBuffer[] | undefined): void {
  for (const buffer of buffers ?? []) pool.give(buffer);
}
