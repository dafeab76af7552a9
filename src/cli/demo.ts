import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { InvalidArgumentError, SpillwayError, errorMessage } from '../errors.js';
import { type Logger, silentLogger } from '../log.js';
import { yieldToLoop } from '../loop.js';
import { SpillStore } from '../store/spill-store.js';

/** What the demo does; sizes in bytes. */
export interface DemoOptions {
  memoryLimit: number;
  valueSize: number;
  /** Bytes pushed through the store. Default: 4 × memoryLimit. */
  dataSize?: number;
  /** Parent directory for spill files. Default: os.tmpdir(). */
  directory?: string;
  /** RSS monitor interval (ms), default 100 as in the store; 0 = off, pausing then follows the store's managed bytes. */
  monitorIntervalMs?: number;
  /** Seed of the generated content (every key derives its own from it). */
  seed?: number;
  /** A paused store that does not resume within this many ms fails the demo instead of hanging. */
  stallTimeoutMs?: number;
  onProgress?: (phase: 'write' | 'read', doneBytes: number, totalBytes: number) => void;
  /** Where the store's errors are logged (the first of each code; the summary counts them all). */
  logger?: Logger;
}

export interface PhaseSummary {
  bytes: number;
  seconds: number;
  /** Bytes per second. */
  throughput: number;
}

export interface DemoSummary {
  verified: boolean;
  keys: number;
  memoryLimit: number;
  valueSize: number;
  dataBytes: number;
  write: PhaseSummary;
  read: PhaseSummary;
  spilledBytes: number;
  unspilledBytes: number;
  diskWrites: number;
  diskReads: number;
  /** Highest process RSS seen (sampled every 20 ms and at every step). */
  peakRss: number;
  /** Highest in-memory bytes held by the store. */
  peakResidentBytes: number;
  pauses: number;
  /** 'error' events from the store (failed writes keep the value in memory). */
  storeErrors: number;
  eventLoop: { maxDelayMs: number; p99DelayMs: number; utilization: number; resolutionMs: number };
  /** Keys whose bytes did not match (at most 10 listed). */
  badKeys: string[];
  badKeyCount: number;
}

/**
 * The delay monitor's tick: it records the gaps between ticks, so its max bounds the longest
 * block of the loop within one tick (10 ms ticks read up to 10 ms above it).
 */
const RESOLUTION_MS = 1;
/** Bytes generated or checked per synchronous step: a few ms of work, then yield. */
const STEP_BYTES = 1024 * 1024;


/** A nonzero 32-bit seed for one key (an integer hash of the key index and the run seed). */
function keySeed(seed: number, index: number): number {
  let h = (Math.imul(index + 1, 0x9e3779b1) ^ seed) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = (h ^ (h >>> 13)) >>> 0;
  return h === 0 ? 0x2545f491 : h;
}

/**
 * Walks a value's bytes with xorshift32 from `seed`, one step (a few ms) at a time:
 * `write` fills them, otherwise it checks them. Returns whether every byte matched.
 */
async function pattern(bytes: Uint8Array, seed: number, write: boolean): Promise<boolean> {
  const words = new Uint32Array(bytes.buffer, bytes.byteOffset, Math.floor(bytes.byteLength / 4));
  const stepWords = STEP_BYTES / 4;
  let x = seed;
  for (let from = 0; from < words.length; from += stepWords) {
    if (from > 0) await yieldToLoop();
    const to = Math.min(words.length, from + stepWords);
    for (let i = from; i < to; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      if (write) words[i] = x;
      else if (words[i] !== x >>> 0) return false;
    }
  }
  for (let i = words.length * 4; i < bytes.byteLength; i++) {
    const b = (x >>> ((i % 4) * 8)) & 0xff;
    if (write) bytes[i] = b;
    else if (bytes[i] !== b) return false;
  }
  return true;
}

function checkOptions(o: DemoOptions): { dataSize: number; keys: number } {
  const positive = (v: number, name: string): void => {
    if (!Number.isSafeInteger(v) || v <= 0) throw new InvalidArgumentError(`${name} must be a positive number of bytes, got ${v}`);
  };
  positive(o.memoryLimit, 'memory limit');
  positive(o.valueSize, 'value size');
  const dataSize = o.dataSize ?? 4 * o.memoryLimit;
  positive(dataSize, 'data size');
  if (o.valueSize > dataSize) throw new InvalidArgumentError(`value size (${o.valueSize}) is larger than the data size (${dataSize})`);
  if (o.valueSize > 2 ** 31) throw new InvalidArgumentError('value size must be at most 2 GiB');
  return { dataSize, keys: Math.ceil(dataSize / o.valueSize) };
}

/**
 * Pushes `dataSize` bytes (default 4 × the memory limit) of seeded values through a
 * SpillStore with backpressure, reads everything back, verifies every byte, and returns
 * the figures. Throws InvalidArgumentError for bad options; never exits the process.
 */
export async function runDemo(options: DemoOptions): Promise<DemoSummary> {
  const { keys } = checkOptions(options);
  const { memoryLimit, valueSize } = options;
  const seed = (options.seed ?? 0x5eed) >>> 0;
  const stallTimeoutMs = options.stallTimeoutMs ?? 30_000;
  const dataBytes = keys * valueSize;
  const store = await SpillStore.open({ memoryLimit, directory: options.directory, monitorIntervalMs: options.monitorIntervalMs ?? 100 });
  let pauses = 0;
  store.on('pause', () => pauses++);
  // Failed writes keep values in memory (nothing is lost); count them for the summary.
  let storeErrors = 0;
  const logged = new Set<string>();
  store.on('error', (err: unknown) => {
    storeErrors++;
    const code = err instanceof SpillwayError ? err.code : 'SPW_ERR_UNKNOWN';
    if (logged.has(code)) return;
    logged.add(code);
    (options.logger ?? silentLogger).error({ code, err: errorMessage(err) }, 'store error (further ones of this code are only counted)');
  });

  let peakRss = process.memoryUsage.rss();
  let peakResidentBytes = 0;
  const sample = (): void => {
    peakRss = Math.max(peakRss, process.memoryUsage.rss());
    peakResidentBytes = Math.max(peakResidentBytes, store.residentBytes);
  };
  const sampler = setInterval(sample, 20);
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  const elu0 = performance.eventLoopUtilization();
  histogram.enable();
  const key = (i: number): string => `demo/${i}`;
  const badKeys: string[] = [];
  let badKeyCount = 0;
  try {
    const t0 = performance.now();
    for (let i = 0; i < keys; i++) {
      if (store.paused) await resumed(store, stallTimeoutMs);
      await yieldToLoop();
      const value = new Uint8Array(valueSize);
      await pattern(value, keySeed(seed, i), true);
      store.set(key(i), value);
      sample();
      options.onProgress?.('write', (i + 1) * valueSize, dataBytes);
    }
    await store.flush();
    const t1 = performance.now();

    // Two readers: one value is checked while the next one is read.
    let next = 0;
    let readBytes = 0;
    const reader = async (): Promise<void> => {
      for (let i = next++; i < keys; i = next++) {
        // A value still alive in memory resolves in a microtask: yield so that the store's
        // background writes (and everything else) get their turn.
        await yieldToLoop();
        const value = await store.get(key(i));
        const ok = value instanceof Uint8Array && value.byteLength === valueSize && (await pattern(value, keySeed(seed, i), false));
        if (!ok && badKeyCount++ < 10) badKeys.push(key(i));
        readBytes += valueSize;
        sample();
        options.onProgress?.('read', readBytes, dataBytes);
      }
    };
    await Promise.all([reader(), reader()]);
    const t2 = performance.now();
    histogram.disable();
    const counters = store.stats().counters;
    const phase = (seconds: number): PhaseSummary => ({ bytes: dataBytes, seconds, throughput: dataBytes / seconds });
    return {
      verified: badKeyCount === 0,
      keys,
      memoryLimit,
      valueSize,
      dataBytes,
      write: phase((t1 - t0) / 1000),
      read: phase((t2 - t1) / 1000),
      spilledBytes: counters.spilledBytes,
      unspilledBytes: counters.unspilledBytes,
      diskWrites: counters.diskWrites,
      diskReads: counters.diskReads,
      peakRss,
      peakResidentBytes,
      pauses,
      storeErrors,
      eventLoop: {
        maxDelayMs: histogram.max / 1e6,
        p99DelayMs: histogram.percentile(99) / 1e6,
        utilization: performance.eventLoopUtilization(elu0).utilization,
        resolutionMs: RESOLUTION_MS,
      },
      badKeys,
      badKeyCount,
    };
  } finally {
    histogram.disable();
    clearInterval(sampler);
    await store.close();
  }
}

/** Waits for the store to resume; a store stuck in pause is an error, not a hang. */
async function resumed(store: SpillStore, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const stall = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const s = store.stats();
      reject(new Error(`the store stayed paused for ${timeoutMs} ms (resident ${s.managedBytes} bytes, RSS ${s.process.rss} bytes)`));
    }, timeoutMs);
  });
  try {
    await Promise.race([store.whenResumed(), stall]);
  } finally {
    clearTimeout(timer);
  }
}
