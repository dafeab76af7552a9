/**
 * `spillway/testing`: what a tier author needs to test a tier. `tierContract` runs the
 * Tier contract (node:test suites) against a tier; `SlowTier` and `FaultyTier` wrap a tier
 * to add latency or inject faults; the sources feed `write` as the store would.
 */
export { tierContract, withTier, roundTrip, assertMissing, type TierHarness } from './tier-contract.js';
export { SlowTier, FaultyTier, type FaultPlan } from './fault-tiers.js';
export { encodedSource, rawSource, failingSource, slowSource, randomWalk, noise, collect, filesUnder, entriesUnder } from './sources.js';
