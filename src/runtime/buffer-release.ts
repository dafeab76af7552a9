/**
 * Frees ArrayBuffers at once instead of when V8 next collects.
 *
 * V8 adds the ArrayBuffer memory allocated since its last mark-compact to the old
 * generation's size when it decides whether to start the next one, and after a collection
 * the limit is the (small) JS heap plus a step of about 10 MB. On a worker that keeps task
 * results of megabytes each, every ~10 MB of them that outlives a scavenge starts a full
 * marking, and the dead ones are only freed by such a marking. Detaching a buffer takes its
 * bytes off V8's count at once, and its memory returns to the C library with it: the
 * worker's collector runs far less often and its RSS follows what the store holds.
 *
 * V8's count is how far that memory has risen above the lowest it has been since the last
 * mark-compact, so a detached buffer that is then replaced (the next chunk laid out, a
 * buffer lent to a thread and handed back) counts again as its replacement arrives. Only
 * memory kept and reused in place, as the pools do, never counts twice.
 *
 * A buffer is detached by moving it into a message posted on a closed MessagePort: the
 * message is serialized (which detaches every buffer in its transfer list) and then
 * dropped, and with it the last reference to the memory. No thread receives it.
 */
import * as workerThreads from 'node:worker_threads';
import { MessageChannel, type MessagePort } from 'node:worker_threads';

/**
 * Whether `buffer` is marked untransferable (Node's own pools, some libraries' arenas):
 * Node 22 and later refuse a transfer list holding one, so it must be copied, not moved.
 * Node 20 has no way to ask, and ignores the mark (undefined there).
 */
export const isMarkedAsUntransferable = (workerThreads as { isMarkedAsUntransferable?: (value: object) => boolean }).isMarkedAsUntransferable;

/**
 * Smaller buffers are left to the collector: they cost it little, and Node's pooled Buffer
 * slabs (8 KiB, shared by many Buffers) are among them.
 */
export const RELEASE_MIN_BYTES = 64 * 1024;

let sink: MessagePort | undefined;

/** A port whose channel is closed: what is posted on it is detached and dropped. */
function closedPort(): MessagePort {
  if (sink === undefined) {
    const { port1, port2 } = new MessageChannel();
    port2.close();
    port1.close();
    sink = port1;
  }
  return sink;
}

/**
 * The buffers of `minBytes` or more that `value` holds: itself, the buffers of typed arrays
 * and DataViews, and those inside arrays, plain objects, Maps and Sets (not inside
 * instances of other classes); SharedArrayBuffers only with `shared`.
 */
export function buffersIn(value: unknown, minBytes: number, shared: true): Set<ArrayBuffer | SharedArrayBuffer>;
export function buffersIn(value: unknown, minBytes: number, shared?: false): Set<ArrayBuffer>;
export function buffersIn(value: unknown, minBytes: number, shared = false): Set<ArrayBuffer | SharedArrayBuffer> {
  const found = new Set<ArrayBuffer | SharedArrayBuffer>();
  const wanted = (b: ArrayBufferLike): boolean => (b instanceof ArrayBuffer || (shared && b instanceof SharedArrayBuffer)) && b.byteLength >= minBytes;
  const seen = new Set<object>();
  // A stack, not recursion: a deeply nested value cannot overflow the call stack.
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v !== 'object' || v === null || seen.has(v)) continue;
    seen.add(v);
    if (ArrayBuffer.isView(v)) {
      if (wanted(v.buffer)) found.add(v.buffer);
    } else if (v instanceof ArrayBuffer || v instanceof SharedArrayBuffer) {
      if (wanted(v)) found.add(v);
    } else if (Array.isArray(v) || v instanceof Set) {
      for (const item of v as Iterable<unknown>) stack.push(item);
    } else if (v instanceof Map) {
      for (const [k, item] of v as Map<unknown, unknown>) stack.push(k, item);
    } else if (Object.getPrototypeOf(v) === Object.prototype) {
      for (const item of Object.values(v)) stack.push(item);
    }
  }
  return found;
}

/**
 * Detaches `buffers` now and returns the bytes that went with them. Every view of them reads
 * as empty afterwards, so the caller must be their only user. A buffer that cannot be
 * moved (marked untransferable) is left as it is, for the collector.
 */
export function releaseBuffers(buffers: Iterable<ArrayBuffer>): number {
  const live = [...buffers].filter((b) => b.byteLength > 0);
  if (live.length === 0) return 0;
  const bytes = live.reduce((sum, b) => sum + b.byteLength, 0);
  const port = closedPort();
  try {
    port.postMessage(null, live);
  } catch {
    // One buffer Node refuses to move (Node 22 and later throw for an untransferable one)
    // fails the whole message, before anything is detached: move the others one at a time.
    for (const buffer of live) {
      try {
        port.postMessage(null, [buffer]);
      } catch {
        // Left for the collector.
      }
    }
  }
  // Node 20 clones an untransferable buffer instead of refusing it: count only the detached.
  let kept = 0;
  for (const buffer of live) kept += buffer.byteLength;
  return bytes - kept;
}
