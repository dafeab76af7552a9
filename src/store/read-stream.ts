import { encode } from '../codec/index.js';
import { asEncodedStream, memoryStream, type EncodedReadStream } from './encoded-io.js';
import type { Entry } from './entry.js';
import type { StoreState } from './state.js';

/**
 * A read stream of an entry's encoded bytes (StoreState's part of
 * SpillStore.createReadStream): encoded from the value's own memory while the store holds
 * it, the value pinned until the stream closes; otherwise straight from its tier without
 * decoding, the copy counted as being read (so not deleted) until then.
 */
export function openReadStream(state: StoreState, entry: Entry): EncodedReadStream {
  if (entry.resident || entry.copy === undefined) {
    // The socket may still be sending from the value's memory after the stream closes.
    entry.owned = false;
    const encoded = encode(entry.value);
    state.pin(entry);
    const stream = memoryStream(encoded);
    stream.once('close', () => state.unpin(entry));
    state.counters.streamedFromMemoryBytes += encoded.byteLength;
    return asEncodedStream(stream, encoded.byteLength, 'memory');
  }
  const copy = entry.copy;
  const tier = state.opts.tiers[copy.tier];
  state.startReading(copy);
  const stream = tier.createReadStream(copy.id);
  stream.once('close', () => state.doneReading(copy));
  state.counters.streamedFromTierBytes += copy.bytes;
  return asEncodedStream(stream, copy.bytes, tier.name);
}
