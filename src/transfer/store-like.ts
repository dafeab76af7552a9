import type { Readable } from 'node:stream';

/**
 * The parts of SpillStore the transfer layer uses, stated structurally so the layer can
 * be tested and reasoned about on its own. SpillStore satisfies both.
 */

/** A readable of a value's encoded bytes; pins the key until it ends or is destroyed. */
export interface EncodedSource extends Readable {
  /** Total encoded length, trailer included. */
  readonly byteLength: number;
  /** 'memory', or the name of the tier the bytes are read from (e.g. 'disk'). */
  readonly source: string;
}

export interface ServingStore {
  /** Throws KeyNotFoundError synchronously for a missing key. */
  createReadStream(key: string): EncodedSource;
}

export interface ReceivingStore {
  readonly memoryLimit: number;
  readonly paused: boolean;
  isAboveTarget(): boolean;
  has(key: string): boolean;
  set(key: string, value: unknown, options?: { size?: number }): void;
  delete(key: string): boolean;
  /** Stores already-encoded bytes in the first tier, verifying the checksum; stores nothing on failure. */
  putEncoded(key: string, source: Uint8Array | AsyncIterable<readonly Uint8Array[]>, byteLength: number): Promise<void>;
}
