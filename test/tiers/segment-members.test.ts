/** Sliced walks over a segment's list of ids: a prune while the list changes, and compaction's sorted list. */
import assert from 'node:assert/strict';
import type { FileHandle } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { Placements } from '../../src/tiers/disk/placements.js';
import { compactWindows, Segment, type LiveValue } from '../../src/tiers/disk/segment.js';
import { MEMBERS_PER_TURN, pruneMembers, sortedLiveValues } from '../../src/tiers/disk/segment-members.js';

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A segment and its placements, driven as the segment store drives them. */
function segmentOf(): { seg: Segment; placements: Placements; place(id: number, stored: number): void; remove(id: number): void; live(id: number): boolean } {
  const placements = new Placements();
  const seg = new Segment(0, 0, 'unused', new Promise<FileHandle>(() => undefined));
  return {
    seg,
    placements,
    place(id, stored) {
      const slot = placements.add(id, stored);
      placements.place(slot, seg.no, seg.size);
      seg.size += stored;
      seg.members.push(id);
      seg.liveCount++;
    },
    remove(id) {
      placements.unplace(placements.slotOf(id));
      placements.delete(id);
      seg.liveCount--;
    },
    live(id) {
      const slot = placements.slotOf(id);
      return slot >= 0 && placements.segment(slot) === seg.no;
    },
  };
}

describe('pruneMembers', () => {
  it('keeps every live id, and those placed while it runs, when ids come and go between its slices', async () => {
    const { seg, placements, place, remove, live } = segmentOf();
    const n = 4 * MEMBERS_PER_TURN;
    for (let id = 0; id < n; id++) place(id, 8);
    for (let id = 1; id < n; id += 2) remove(id);
    // Written again after its delete: listed twice.
    remove(2);
    place(2, 8);
    const list = seg.members;
    const done = pruneMembers(seg, placements, () => false);
    assert.equal(seg.members, list, 'not done in the step that started it');
    await nextTurn();
    // Between slices: new ids, removals behind and ahead of the walk, an id written again.
    for (let id = n; id < n + 1000; id++) place(id, 8);
    for (let id = 0; id < n; id += 64) if (live(id)) remove(id);
    remove(4);
    place(4, 8);
    await done;
    const listed = new Set(seg.members);
    for (let id = 0; id < n + 1000; id++) if (live(id)) assert.ok(listed.has(id), `live id ${id} was dropped`);
    const dead = seg.members.filter((id) => !live(id)).length;
    // Dead: only those removed during the walk behind it, and id 4's first entry.
    assert.ok(dead <= n / 64 + 1, `${dead} dead records kept`);
    assert.ok(seg.members.length < list.length, 'pruned');
  });

  it('drops its result when the list is replaced (the segment retired) or the store closes', async () => {
    const { seg, placements, place, remove } = segmentOf();
    for (let id = 0; id < 3 * MEMBERS_PER_TURN; id++) place(id, 8);
    for (let id = 0; id < 3 * MEMBERS_PER_TURN; id += 2) remove(id);
    const full = seg.members.length;
    let closed = false;
    const closing = pruneMembers(seg, placements, () => closed);
    closed = true;
    await closing;
    assert.equal(seg.members.length, full, 'a closed store keeps its list as it was');
    assert.equal(seg.pruning, false);
    const retiring = pruneMembers(seg, placements, () => false);
    seg.members = [];
    await retiring;
    assert.deepEqual(seg.members, [], 'a retired segment lists nothing');
  });
});

describe('sortedLiveValues', () => {
  it('orders the values as compactWindows does, across buckets and slices, with empty values and ids listed twice', async () => {
    const { seg, placements, place, remove } = segmentOf();
    let seed = 7;
    const random = (k: number): number => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed % k);
    const n = 40_000;
    // Sizes from empty to over a bucket (16 KiB); the list out of offset order, as group writes land.
    for (let id = 0; id < n; id++) place(id, random(10) === 0 ? 0 : random(50) === 0 ? 20_000 + random(5000) : 1 + random(300));
    for (let i = 0; i < n; i++) {
      const j = random(n);
      [seg.members[i], seg.members[j]] = [seg.members[j], seg.members[i]];
    }
    for (let id = 0; id < n; id += 3) remove(id);
    seg.members.push(...seg.members.slice(0, 500));
    seg.sealed = true;
    const sorted = await sortedLiveValues(seg, placements, () => false);
    assert.ok(sorted !== undefined);
    const values = sorted.slice(0, sorted.count);
    const expected: LiveValue[] = [];
    for (let id = 0; id < n; id++) {
      const slot = placements.slotOf(id);
      if (slot >= 0) expected.push({ id, offset: placements.offset(slot), stored: placements.stored(slot) });
    }
    compactWindows(expected, 1 << 20);
    assert.equal(values.length, expected.length, 'each live value once');
    // Empty values at one offset may come in any order among themselves.
    const key = (v: LiveValue): string => `${v.offset}:${v.stored}`;
    assert.deepEqual(values.map(key), expected.map(key));
    assert.deepEqual(new Set(values.map((v) => v.id)), new Set(expected.map((v) => v.id)));
  });
});
