import { Accounting, Bucket } from './entry.js';
import type { StoreState } from './state.js';

/** Recomputes every bucket and link of a store from scratch; returns the violations found (none expected). For tests. */
export function findInvariantViolations(state: StoreState): string[] {
  const problems: string[] = [];
  const fresh = new Accounting();
  const linked = state.chain.lrus.map(() => 0);
  for (const [key, entry] of state.entries) {
    fresh.add(entry);
    const name = JSON.stringify(key.slice(0, 40));
    if (entry.key !== key || entry.removed) problems.push(`${name}: stale entry in the map`);
    const evictable = entry.resident && entry.pins === 0 && entry.write === undefined && !entry.unspillable && !state.waiting.has(entry);
    if (evictable !== entry.slot >= 0) problems.push(`${name}: LRU link ${entry.slot} but evictable=${evictable}`);
    if (!entry.resident && entry.copy === undefined) problems.push(`${name}: neither in memory nor below`);
    if (entry.resident && entry.detached) problems.push(`${name}: resident and detached`);
    if (entry.pins < 0 || (entry.copy?.readers ?? 0) < 0) problems.push(`${name}: negative pins or readers`);
    if ((entry.copy !== undefined) !== entry.copySlot >= 0) problems.push(`${name}: tier LRU link does not match its copy`);
    if (entry.copy !== undefined) linked[entry.copy.tier]++;
  }
  for (const b of [Bucket.Memory, Bucket.Spilling, Bucket.Pinned, Bucket.Detached]) {
    if (fresh.counts[b] !== state.acct.counts[b] || Math.abs(fresh.bytes[b] - state.acct.bytes[b]) > 1e-6) {
      problems.push(`bucket ${b}: counted ${state.acct.counts[b]}/${state.acct.bytes[b]}, actual ${fresh.counts[b]}/${fresh.bytes[b]}`);
    }
  }
  if (Math.abs(fresh.unencodableBytes - state.acct.unencodableBytes) > 1e-6) {
    problems.push(`unencodable bytes: counted ${state.acct.unencodableBytes}, actual ${fresh.unencodableBytes}`);
  }
  if (state.lru.size !== [...state.lru.fromOldest()].length) problems.push('memory LRU size does not match its links');
  state.chain.lrus.forEach((lru, t) => {
    if (lru.size !== linked[t]) problems.push(`tier ${t} LRU holds ${lru.size}, entries with copies there: ${linked[t]}`);
  });
  return problems;
}
