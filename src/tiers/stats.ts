import type { StoredChunk } from './chunks.js';
import type { TierStats } from './tier.js';

/** Mutable counters behind a tier's `stats()`; the tier owns count and bytes. */
export class TierCounters {
  reads = 0;
  writes = 0;
  deletes = 0;
  failedWrites = 0;
  bytesRead = 0;
  bytesWritten = 0;
  readSeconds = 0;
  writeSeconds = 0;
  bytesBeforeCompression = 0;
  bytesAfterCompression = 0;
  /** Chunks stored compressed, and kept raw because compressing did not pay. */
  compressedChunks = 0;
  rawChunks = 0;

  /** Starts a timer; call the returned function to get seconds elapsed. */
  static timer(): () => number {
    const start = performance.now();
    return () => (performance.now() - start) / 1000;
  }

  recordWrite(seconds: number, logical: number, stored: number): void {
    this.writes++;
    this.writeSeconds += seconds;
    this.bytesWritten += logical;
    this.bytesBeforeCompression += logical;
    this.bytesAfterCompression += stored;
  }

  /** Counts how the chunks of a value just written were stored. */
  recordChunks(chunks: readonly StoredChunk[]): void {
    for (const c of chunks) {
      if (c.compressed) this.compressedChunks++;
      else this.rawChunks++;
    }
  }

  recordFailedWrite(seconds: number): void {
    this.failedWrites++;
    this.writeSeconds += seconds;
  }

  recordRead(seconds: number, logical: number): void {
    this.reads++;
    this.readSeconds += seconds;
    this.bytesRead += logical;
  }

  snapshot(held: { count: number; bytes: number; logicalBytes: number }, details: Record<string, number>): TierStats {
    return {
      count: held.count,
      bytes: held.bytes,
      logicalBytes: held.logicalBytes,
      compressionRatio: held.bytes > 0 ? held.logicalBytes / held.bytes : 1,
      reads: this.reads,
      writes: this.writes,
      deletes: this.deletes,
      failedWrites: this.failedWrites,
      bytesRead: this.bytesRead,
      bytesWritten: this.bytesWritten,
      readSeconds: this.readSeconds,
      writeSeconds: this.writeSeconds,
      bytesBeforeCompression: this.bytesBeforeCompression,
      bytesAfterCompression: this.bytesAfterCompression,
      details,
    };
  }
}
