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
 * Takes the chunks under `keys` out of the store, in order. On a failure the buffers taken
 * so far go back to the pool, and the keys not yet taken stay in the store (the caller deletes them).
 */
export async function takeChunks(store: SpillStore, keys: readonly string[], pool: SizedBufferPool): Promise<ChunkLoan> {
  const loan: ChunkLoan = { chunks: [], lend: [], bytes: 0 };
  try {
    for (const key of keys) {
      const taken = await store.take(key, (n) => pool.take(n));
      if ('encoded' in taken) {
        loan.chunks.push({ encoded: taken.encoded });
        loan.lend.push(taken.encoded.buffer as ArrayBuffer);
        loan.bytes += taken.encoded.byteLength;
        continue;
      }
      const chunk = taken.value as Uint8Array;
      loan.chunks.push(chunk);
      loan.bytes += chunk.byteLength;
      // A chunk the receiver laid out in a pooled buffer: the store held it alone, and no one else asks for shuffle keys.
      if (taken.alone && pool.made(chunk.buffer)) loan.lend.push(chunk.buffer as ArrayBuffer);
    }
  } catch (err) {
    giveBack(pool, loan.lend);
    throw err;
  }
  return loan;
}

/** Buffers back from the thread (or never sent) return to the pool. */
export function giveBack(pool: SizedBufferPool, buffers: readonly ArrayBuffer[] | undefined): void {
  for (const buffer of buffers ?? []) pool.give(buffer);
}
