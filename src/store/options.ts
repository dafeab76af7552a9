import os from 'node:os';
import { InvalidArgumentError } from '../errors.js';
import { DiskTier } from '../tiers/disk/disk-tier.js';
import type { Tier } from '../tiers/tier.js';
import { parseBytes } from '../units.js';
import { SMALL_ENCODED_BYTES } from '../codec/index.js';

export interface SpillStoreOptions {
  /** Memory the store may use: bytes, or a string like '512 MiB'. Default: half of this machine's (or cgroup's) memory. */
  memoryLimit?: number | string;
  /** Fraction of memoryLimit above which managed values are spilled, LRU first. Default 0.6. */
  target?: number | false;
  /** Fraction of memoryLimit of process RSS above which the monitor spills. Default 0.7. */
  spill?: number | false;
  /** Fraction of memoryLimit above which the store pauses producers. Default 0.8. */
  pause?: number | false;
  /**
   * Fraction of memoryLimit under which the values the store holds must be back before a
   * paused store resumes its producers (process RSS must also be back under `target` when
   * the monitor runs). Between `target` and `pause`. Default: an eighth of the way from
   * `pause` down to `target` (0.775), so a producer resumes as soon as a spill lands and
   * produces while the next one is written, instead of waiting for every write in flight.
   */
  resume?: number;
  /** Parent directory for spill files. Default: os.tmpdir(). The store works in a fresh folder inside it. */
  directory?: string;
  /** Cap on bytes below memory (on disk). Default: none. */
  maxSpill?: number | string | false;
  /** Milliseconds between process-memory checks; 0 or false turns the monitor off. Default 100. */
  monitorIntervalMs?: number | false;
  /** Writes to tiers in flight at once. Default 2. */
  spillConcurrency?: number;
  /** Storage tiers below memory, in order. Default: one DiskTier in `directory`. */
  tiers?: Tier[];
  /** Milliseconds before retrying a value whose write failed. Default 1000. */
  retryDelayMs?: number;
  /**
   * Run V8's garbage collector when process RSS is over `target` and the store has let go
   * of 1/8 of memoryLimit that no collection has freed yet (deleted, or dropped after
   * spilling), at most once per 100 ms after any full collection, 25 % of the time, and
   * never while V8 is marking (`collectGarbage(true)` skips the ration: half as much let
   * go of is enough). Needs the monitor. Default: on when the monitor is. The values a store
   * lets go of stay in RSS until V8 collects, and V8 sizes its collections by the JS
   * heap, not by the buffers outside it: without these collections the dead values, and
   * the freed memory malloc keeps once it has held them, take the process well past its
   * limit. Opening a store with it sets V8's `--expose-gc` flag for the process
   * (runtime/garbage-collection.ts); `false` leaves collecting to V8.
   */
  collectGarbage?: boolean;
  /**
   * Dropped values of at least this many bytes keep a weak reference, so one still in use
   * elsewhere is found again without I/O (and counted as `detached`). Smaller ones are let
   * go outright: a weak reference keeps every dropped value alive until V8's next full
   * collection and costs the spill of each value time, more than reading a small value
   * again would. Default
   * 64 KiB (the size up to which values are spilled in batches); 0 tracks every object.
   */
  weakRefBytes?: number | string;
}

export interface ResolvedOptions {
  memoryLimit: number;
  targetBytes: number;
  spillBytes: number;
  pauseBytes: number;
  /** Managed bytes must be back under this to resume (Infinity when `pause` is off). */
  resumeBytes: number;
  maxSpill: number;
  monitorIntervalMs: number;
  spillConcurrency: number;
  tiers: Tier[];
  retryDelayMs: number;
  collectGarbage: boolean;
  weakRefBytes: number;
}

/** The default fractions of memoryLimit. */
export const DEFAULT_LEVELS = { target: 0.6, spill: 0.7, pause: 0.8 } as const;
/** By default a paused store resumes this fraction of the way from `pause` down to `target`. */
const RESUME_MARGIN = 1 / 8;

/** Values this small are batched when spilled, and cheaper to read again than to track weakly. */
const DEFAULT_WEAK_REF_BYTES = SMALL_ENCODED_BYTES;

function fraction(value: number | false | undefined, fallback: number, name: string): number | false {
  if (value === undefined) return fallback;
  if (value === false) return false;
  if (typeof value !== 'number' || !(value > 0 && value <= 1)) {
    throw new InvalidArgumentError(`${name} must be a fraction in (0, 1] or false, got ${String(value)}`);
  }
  return value;
}

function defaultMemoryLimit(): number {
  const constrained = process.constrainedMemory?.() ?? 0;
  const total = constrained > 0 ? Math.min(constrained, os.totalmem()) : os.totalmem();
  return Math.floor(total / 2);
}

export function resolveOptions(options: SpillStoreOptions): ResolvedOptions {
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('options must be an object');
  const memoryLimit = options.memoryLimit === undefined ? defaultMemoryLimit() : parseBytes(options.memoryLimit, 'memoryLimit');
  if (memoryLimit <= 0) throw new InvalidArgumentError('memoryLimit must be positive');
  const target = fraction(options.target, DEFAULT_LEVELS.target, 'target');
  const spill = fraction(options.spill, DEFAULT_LEVELS.spill, 'spill');
  const pause = fraction(options.pause, DEFAULT_LEVELS.pause, 'pause');
  const resume = resumeLevel(options.resume, target, pause);
  const monitorIntervalMs = options.monitorIntervalMs === false ? 0 : (options.monitorIntervalMs ?? 100);
  if (!Number.isFinite(monitorIntervalMs) || monitorIntervalMs < 0) {
    throw new InvalidArgumentError(`monitorIntervalMs must be a non-negative number of ms or false, got ${monitorIntervalMs}`);
  }
  const spillConcurrency = options.spillConcurrency ?? 2;
  if (!Number.isInteger(spillConcurrency) || spillConcurrency < 1) {
    throw new InvalidArgumentError(`spillConcurrency must be a positive integer, got ${spillConcurrency}`);
  }
  const retryDelayMs = options.retryDelayMs ?? 1000;
  if (!Number.isFinite(retryDelayMs) || retryDelayMs < 0) throw new InvalidArgumentError('retryDelayMs must be a non-negative number');
  if (options.collectGarbage !== undefined && typeof options.collectGarbage !== 'boolean') {
    throw new InvalidArgumentError('collectGarbage must be a boolean');
  }
  const maxSpill =
    options.maxSpill === undefined || options.maxSpill === false ? Infinity : parseBytes(options.maxSpill, 'maxSpill');
  if (options.directory !== undefined && (typeof options.directory !== 'string' || options.directory === '')) {
    throw new InvalidArgumentError('directory must be a non-empty string');
  }
  const tiers = options.tiers ?? [new DiskTier({ directory: options.directory })];
  validateTiers(tiers);
  const bytesOf = (f: number | false): number => (f === false ? Infinity : Math.floor(f * memoryLimit));
  return {
    memoryLimit,
    // Spilling starts by the pause level at the latest: a store paused under its target
    // would never spill back under its resume level.
    targetBytes: Math.min(bytesOf(target), bytesOf(pause)),
    spillBytes: bytesOf(spill),
    pauseBytes: bytesOf(pause),
    resumeBytes: bytesOf(resume),
    maxSpill,
    monitorIntervalMs,
    spillConcurrency,
    tiers,
    retryDelayMs,
    collectGarbage: options.collectGarbage ?? monitorIntervalMs > 0,
    weakRefBytes: options.weakRefBytes === undefined ? DEFAULT_WEAK_REF_BYTES : parseBytes(options.weakRefBytes, 'weakRefBytes'),
  };
}

/**
 * The resume level: given, or RESUME_MARGIN of the way from pause to target. Under
 * `target` the store would never resume (spilling stops there); over `pause` it would
 * resume while still over the pause level.
 */
function resumeLevel(value: number | undefined, target: number | false, pause: number | false): number | false {
  // Checked even when `pause` is off (and the level unused): bad input is never accepted silently.
  if (value !== undefined && (typeof value !== 'number' || !(value > 0 && value <= 1))) {
    throw new InvalidArgumentError(`resume must be a fraction in (0, 1], got ${String(value)}`);
  }
  if (pause === false) return false;
  if (value === undefined) return target === false || target >= pause ? pause : pause - (pause - target) * RESUME_MARGIN;
  const given = fraction(value, pause, 'resume');
  if (given === false || given > pause || (target !== false && given < Math.min(target, pause))) {
    throw new InvalidArgumentError(`resume must be a fraction between target and pause, got ${String(value)}`);
  }
  return given;
}

function validateTiers(tiers: Tier[]): void {
  if (!Array.isArray(tiers) || tiers.length === 0) throw new InvalidArgumentError('tiers must be a non-empty array');
  const names = new Set<string>();
  for (const tier of tiers) {
    if (typeof tier !== 'object' || tier === null || typeof tier.write !== 'function' || typeof tier.read !== 'function') {
      throw new InvalidArgumentError('every tier must implement the Tier interface (see docs/tiers.md)');
    }
    if (typeof tier.name !== 'string' || tier.name === '' || tier.name === 'memory') {
      throw new InvalidArgumentError(`tier name ${JSON.stringify(tier.name)} is invalid (non-empty, not "memory")`);
    }
    if (names.has(tier.name)) throw new InvalidArgumentError(`two tiers are named "${tier.name}"`);
    names.add(tier.name);
    if (!(tier.capacity > 0)) throw new InvalidArgumentError(`tier "${tier.name}" has no capacity (${tier.capacity})`);
  }
}
