/** What a worker's heartbeat carries: its store's stats() in short, and its own. */
export interface WorkerHeartbeat {
  workerId: string;
  /** Bytes held in memory by the store (memory + spilling + pinned). */
  residentBytes: number;
  memory: { count: number; bytes: number };
  pinned: { count: number; bytes: number };
  disk: { count: number; bytes: number };
  detached: { count: number; bytes: number };
  unmanaged: number;
  rss: number;
  paused: boolean;
  /** The spill write error while writes keep failing (a full disk); absent or null when writes land. */
  spillFailure?: string | null;
  /**
   * Event-loop delay since the previous heartbeat: the most (ms) that a tick of the worker's
   * delay timer ran late, which is how long a callback due then waited. The longest block
   * of the loop lies within one tick above it (docs/metrics.md, "Event-loop delay").
   */
  eventLoopDelayMs: number;
  /** 99th percentile of the same ticks' lateness over the same interval (ms). */
  eventLoopDelayP99Ms?: number;
  /** 99th percentile of the same ticks' lateness since the worker started (ms). */
  eventLoopDelayRunP99Ms?: number;
  /**
   * Cumulative since the worker started (Linux): seconds its event loop's thread ran on a
   * core, and seconds it was ready to run but waited for one (the kernel's run queue). Null
   * until first measured or where the system does not say.
   */
  loopRunSeconds?: number | null;
  loopWaitSeconds?: number | null;
  /** Tasks running now and waiting in the worker's queue. */
  executing: number;
  queued: number;
  /** Cumulative: bytes spilled and unspilled by the store, bytes served to peers from disk and from memory. */
  spilledBytes: number;
  unspilledBytes: number;
  servedFromDiskBytes: number;
  servedFromMemoryBytes: number;
  /** Cumulative: bytes fetched from peers, by where they went here (decoded into memory, or written to disk as they came). */
  receivedIntoMemoryBytes?: number;
  receivedIntoDiskBytes?: number;
  /** Cumulative: bytes of shuffle pieces pushed to peers and pushed here by peers (a worker's pieces for itself not counted). */
  shuffleSentBytes?: number;
  shuffleReceivedBytes?: number;
  /** Shuffles this worker holds anything of (pieces, frame ids, awaited adoptions): 0 once every shuffle is over. */
  shufflesHeld?: number;
  /** Cumulative: seconds the store spent writing to and reading from its tiers. */
  spillWriteSeconds?: number;
  spillReadSeconds?: number;
  /** Bytes and values held by each tier below memory. */
  tiers?: Array<{ name: string; count: number; bytes: number }>;
  /** Cumulative: the store's errors (failed spills and reads...) by SpillwayError code. */
  spillErrors?: Record<string, number>;
  /** Bytes free for this worker on the file system of its spill folder; null until first measured. */
  diskFreeBytes?: number | null;
  /** The store's pause level in bytes (memory above it pauses the worker); absent when pausing is off. */
  pauseBytes?: number;
  /** Times a supervisor started this worker's slot again, by reason (`exit`, `memory`); absent when not supervised. */
  supervisorRestarts?: Record<string, number>;
}
