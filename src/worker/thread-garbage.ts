/**
 * Garbage a task leaves in its thread that the thread cannot free at once: the runtime
 * frees the large copies of a task's inputs itself (worker/thread.ts, `inputBuffers` says
 * which), but code that runs inside a task, such as a shuffle split, knows of other
 * buffers that die with it. It reports them here, and the thread's collector counts them
 * once the task ends (runtime/thread-collector.ts).
 */
import { RELEASE_MIN_BYTES, buffersIn } from '../runtime/buffer-release.js';

let left = 0;

/** The current task leaves `bytes` of garbage for a collection. */
export function leaveGarbage(bytes: number): void {
  if (bytes > 0) left += bytes;
}

/** What the task that just ended reported, reset for the next one. */
export function takeLeftGarbage(): number {
  const bytes = left;
  left = 0;
  return bytes;
}

/**
 * A finished task's input buffers, sorted in one walk (the inputs can be thousands of
 * small pieces): `own`, the copies this thread can free itself (ArrayBuffers of
 * RELEASE_MIN_BYTES or more that can move); `leftBytes`, the bytes only a collection
 * frees (shared memory, which this thread's references keep alive too, small buffers,
 * buffers marked untransferable). `kept`, buffers the loop keeps (lent ones, which go
 * back to it, and staging buffers, which its pool holds: worker/staging.ts): in neither.
 */
export function inputBuffers(inputs: unknown, kept: readonly ArrayBufferLike[], untransferable: (buffer: ArrayBuffer) => boolean): { own: ArrayBuffer[]; leftBytes: number } {
  const own: ArrayBuffer[] = [];
  let leftBytes = 0;
  for (const buffer of buffersIn(inputs, 0, true)) {
    if (kept.includes(buffer)) continue;
    if (buffer instanceof ArrayBuffer && buffer.byteLength >= RELEASE_MIN_BYTES && !untransferable(buffer)) own.push(buffer);
    else leftBytes += buffer.byteLength;
  }
  return { own, leftBytes };
}
