import { Slicer } from '../../loop.js';
import type { Placements } from './placements.js';
import type { LiveValue, Segment } from './segment.js';

/**
 * Walks over a segment's list of members (segment.ts), cut into slices with a loop turn
 * between: a segment of tiny values lists millions of ids, far too many to walk in one
 * step of the loop (a prune, a compaction's sorted list of live values).
 */

/**
 * At most this many members (or values) are handled per loop turn: each is a few
 * typed-array lookups, so a slice stays around a millisecond once optimized. Between
 * MIN_PER_TURN and that, a slice also ends after SLICE_MS, for the first walks, which run
 * in the interpreter at many times the cost. A list of up to MIN_PER_TURN is always
 * pruned in the step of the delete that asked for it.
 */
export const MEMBERS_PER_TURN = 32768;
const MIN_PER_TURN = 8192;
const SLICE_MS = 2;
/** Members handled between two looks at the clock. */
const STEP = 1024;

/**
 * Compaction sorts its values by offset in buckets of this many bytes, each on its own: a
 * bucket holds at most this many values with bytes (plus empty ones, which share offsets),
 * so sorting one is a short step, and the buckets cost no global sort.
 */
const BUCKET_BYTES = 16 * 1024;

/** Runs `run` over [0, count) in steps, the first slice now; false if `stop` said so between slices. */
async function inSlices(count: number, run: (from: number, to: number) => void, stop: () => boolean): Promise<boolean> {
  const slicer = new Slicer(SLICE_MS);
  let done = 0;
  for (let from = 0; from < count; from += STEP) {
    if (done >= MEMBERS_PER_TURN || (done >= MIN_PER_TURN && slicer.due())) {
      await slicer.turn();
      if (stop()) return false;
      done = 0;
    }
    run(from, Math.min(count, from + STEP));
    done += STEP;
  }
  return true;
}

/**
 * Visits the ids of `list[0, end)` placed in `segment` when visited, each once (a caller
 * may write an id again after deleting it, so it is listed twice), marked by slot in a
 * bit set (a bit per slot of the tier: cheaper than a Set of the ids, even for a short
 * list). An id live in the segment throughout keeps its slot throughout, so only its own
 * entry marks it; a slot past the bit set was taken during the walk, by an id placed
 * since, which is listed after `end`. False if stopped.
 */
function eachLive(segment: Segment, list: readonly number[], end: number, placements: Placements, visit: (id: number, slot: number) => void, stop: () => boolean): Promise<boolean> {
  const slots = placements.slotCount;
  const seen = new Uint32Array(Math.ceil(slots / 32));
  return inSlices(
    end,
    (from, to) => {
      for (let i = from; i < to; i++) {
        const id = list[i];
        const slot = placements.slotOf(id);
        if (slot < 0 || slot >= slots || (seen[slot >>> 5] & (1 << (slot & 31))) !== 0 || placements.segment(slot) !== segment.no) continue;
        seen[slot >>> 5] |= 1 << (slot & 31);
        visit(id, slot);
      }
    },
    stop,
  );
}

/**
 * Drops the dead and repeated ids from a segment's members. Started by the delete that
 * found them outnumbering the live ones; the first slice runs in its step (a small list is
 * done there), the rest in later turns. Ids appended meanwhile are kept after the walked
 * ones; a walk whose list was replaced (the segment retired) or whose store closed is
 * dropped. Never mutates the list it walks (compaction may hold it).
 */
export async function pruneMembers(segment: Segment, placements: Placements, closed: () => boolean): Promise<void> {
  segment.pruning = true;
  try {
    const list = segment.members;
    const end = list.length;
    const kept: number[] = [];
    const stop = (): boolean => closed() || segment.members !== list;
    if (!(await eachLive(segment, list, end, placements, (id) => kept.push(id), stop)) || stop()) return;
    for (let i = end; i < list.length; i++) kept.push(list[i]);
    segment.members = kept;
  } finally {
    segment.pruning = false;
  }
}

/** A segment's live values in the order compaction moves them. */
export interface SortedValues {
  readonly count: number;
  /** Values `from` to `to` (exclusive) of the sorted list, made on demand. */
  slice(from: number, to: number): LiveValue[];
}

/**
 * A sealed segment's live values, sorted as compactWindows sorts them (by offset, empty
 * ones first among equal offsets), in slices: a counting sort into buckets of BUCKET_BYTES,
 * then each bucket sorted natively as numbers that hold the offset in the bucket, whether
 * the value has bytes, and its index. Typed arrays, not an object per value: objects kept
 * through the compaction would make every minor collection meanwhile trace them. Undefined
 * if stopped.
 */
export async function sortedLiveValues(segment: Segment, placements: Placements, stop: () => boolean): Promise<SortedValues | undefined> {
  const list = segment.members;
  // Sized by the live count, not the list (which may be mostly dead): zeroing a large
  // allocation costs loop time. A sealed segment gains no values, so no more are found.
  const ids = new Float64Array(segment.liveCount);
  const offsets = new Float64Array(segment.liveCount);
  const stored = new Float64Array(segment.liveCount);
  const buckets = Math.floor(segment.size / BUCKET_BYTES) + 1;
  // starts[b + 1] counts bucket b's values, then (summed) starts[b] is where bucket b begins.
  const starts = new Uint32Array(buckets + 1);
  let n = 0;
  const visit = (id: number, slot: number): void => {
    if (n === ids.length) return;
    const offset = placements.offset(slot);
    ids[n] = id;
    offsets[n] = offset;
    stored[n++] = placements.stored(slot);
    starts[Math.floor(offset / BUCKET_BYTES) + 1]++;
  };
  if (!(await eachLive(segment, list, list.length, placements, visit, stop))) return undefined;
  for (let b = 1; b <= buckets; b++) starts[b] += starts[b - 1];
  // Below 2^53 while n < 2^38: (offset in bucket * 2 + has bytes) * n + index.
  const keys = new Float64Array(n);
  const next = starts.slice(0, buckets);
  const scatter = (from: number, to: number): void => {
    for (let i = from; i < to; i++) {
      const b = Math.floor(offsets[i] / BUCKET_BYTES);
      keys[next[b]++] = ((offsets[i] - b * BUCKET_BYTES) * 2 + (stored[i] > 0 ? 1 : 0)) * n + i;
    }
  };
  let b = 0;
  // Each slice sorts the buckets that begin in it.
  const sort = (_: number, to: number): void => {
    for (; b < buckets && starts[b] < to; b++) if (starts[b + 1] - starts[b] > 1) keys.subarray(starts[b], starts[b + 1]).sort();
  };
  if (!(await inSlices(n, scatter, stop)) || !(await inSlices(n, sort, stop))) return undefined;
  return {
    count: n,
    slice(from, to) {
      const values: LiveValue[] = [];
      for (let k = from; k < Math.min(to, n); k++) {
        const i = keys[k] % n;
        values.push({ id: ids[i], offset: offsets[i], stored: stored[i] });
      }
      return values;
    },
  };
}
