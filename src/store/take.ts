import { ClosedError, KeyNotFoundError, TierReadError } from '../errors.js';
import { type Tier, recycleChunk } from '../tiers/tier.js';
import type { Entry } from './entry.js';
import type { StoreState } from './state.js';

/** What `take` hands over: the value itself, or a spilled value's encoded bytes in the caller's buffer. */
export type Taken =
  | {
      value: unknown;
      /**
       * The store held the value alone (no lease pinned it): once no caller of `get` or
       * `peek` holds it either, the taker may reuse its memory.
       */
      alone: boolean;
    }
  | {
      /** The value's encoded bytes as stored (docs/protocol.md), in the buffer `into` gave: not yet checked. */
      encoded: Uint8Array;
    };

/**
 * Takes a key out of the store (StoreState's part of SpillStore.take): removes it, and
 * resolves once nothing the store runs still reads the value's memory (a spill of it in
 * flight is cancelled and waited for). A value in memory, or dropped but still alive,
 * comes as it is; a spilled one is read into a buffer of the caller's (`into`), never
 * into one the store allocates, and never decoded here: in place where the tier can
 * (`Tier.readInto`), otherwise copied from its read stream.
 */
export async function takeEntry(state: StoreState, entry: Entry, into: (byteLength: number) => Uint8Array): Promise<Taken> {
  const value = entry.resident ? entry.value : entry.weak?.deref();
  if (value !== undefined) {
    const alone = entry.pins === 0;
    const writing = entry.write?.done;
    // Not counted as let go: the taker keeps the memory (a collection would free nothing).
    state.remove(entry, true, true);
    state.onShrink();
    // The write (cancelled now) may still be encoding or writing from the value's memory.
    if (writing !== undefined) await writing.catch(() => undefined);
    return { value, alone };
  }
  const copy = entry.copy;
  if (copy === undefined) throw new KeyNotFoundError(entry.key);
  const tier = state.opts.tiers[copy.tier];
  state.startReading(copy);
  try {
    const out = into(copy.bytes);
    if (out.byteLength !== copy.bytes) throw new RangeError(`take needs a buffer of ${copy.bytes} bytes, got ${out.byteLength}`);
    let at: number;
    try {
      at = await readWhole(tier, copy.id, out);
    } catch (err) {
      if (state.closed) throw new ClosedError();
      state.counters.readErrors++;
      const failure = new TierReadError(tier.name, entry.key, err);
      state.report(failure);
      throw failure;
    }
    if (at !== copy.bytes) throw new TierReadError(tier.name, entry.key, new Error(`read ${at} of ${copy.bytes} bytes`));
    state.counters.diskReads++;
    state.counters.unspilledBytes += at;
    // Removed only once read: a failed read leaves the key as it was.
    if (!entry.removed) {
      state.remove(entry);
      state.onShrink();
    }
    return { encoded: out };
  } finally {
    state.doneReading(copy);
  }
}

/**
 * Reads value `id` into `out`: in place where the tier can, otherwise from its read stream.
 * Resolves to the bytes read.
 */
async function readWhole(tier: Tier, id: number, out: Uint8Array): Promise<number> {
  if (tier.readInto !== undefined) {
    await tier.readInto(id, out);
    return out.byteLength;
  }
  const stream = tier.createReadStream(id);
  let at = 0;
  for await (const chunk of stream as AsyncIterable<Uint8Array>) {
    if (at + chunk.byteLength > out.byteLength) throw new RangeError(`tier "${tier.name}" read more than the ${out.byteLength} bytes of value #${id}`);
    out.set(chunk, at);
    at += chunk.byteLength;
    recycleChunk(stream, chunk);
  }
  return at;
}
