import os from 'node:os';
import { InvalidArgumentError } from '../../errors.js';
import { byteOption } from '../../units.js';
import { DEFAULT_CHUNK_BYTES, MAX_CHUNK_BYTES, MiB, type CompressionMode } from '../chunks.js';
import { checkNonNegativeInteger, checkPositive } from '../validate.js';

export interface DiskTierOptions {
  /** Parent directory; the tier creates a fresh folder of its own inside it. Default: os.tmpdir(). */
  directory?: string;
  /** Several parents (several disks), used in turn; each gets its own fresh folder. Overrides `directory`. */
  directories?: string[];
  name?: string;
  /** Byte budget for this tier (stored bytes). Default: unlimited. */
  capacity?: number | string;
  /** Per chunk: `lz4` always, `auto` when a quick probe says it pays, `none` (default) never. */
  compression?: CompressionMode;
  /** Compression unit (default 1 MiB, at most 8 MiB). */
  chunkBytes?: number | string;
  /** Values smaller than this go to shared segment files (default 1 MiB; 0 disables fusing). */
  smallValueBytes?: number | string;
  /** Size at which a segment file is sealed and a new one started (default 64 MiB). */
  segmentBytes?: number | string;
  /** A sealed segment with at least this fraction of dead bytes is compacted (default 0.5). */
  compactDeadFraction?: number;
  /**
   * Segments filled at once per directory, appends taking them in turn (default 2): the kernel
   * takes one write at a time into a file, so two segments let two writes land in parallel.
   * Each may leave one partly filled segment behind.
   */
  segmentLanes?: number;
  /**
   * Write segment files past the page cache (O_DIRECT) where the filesystem allows it, else
   * buffered (default true): spilled values are cold, and a buffered write costs kernel CPU
   * and a second copy in memory. A value read back soon after it was spilled then comes
   * from the disk, not the page cache. Files of large values are written buffered either way.
   */
  directWrites?: boolean;
  /** Bytes per read call when loading a value. */
  readSliceBytes?: number | string;
  /** Chunk size of streams that serve peers: large enough that per-chunk costs vanish, small enough to keep memory per stream low. */
  streamChunkBytes?: number | string;
}

type ByteOptions = 'capacity' | 'chunkBytes' | 'smallValueBytes' | 'segmentBytes' | 'readSliceBytes' | 'streamChunkBytes';

export type ResolvedDiskOptions = Required<Omit<DiskTierOptions, 'directory' | 'directories' | ByteOptions>> & Record<ByteOptions, number> & { parents: string[] };

/** Fills in defaults and rejects misconfigurations with InvalidArgumentError. */
export function resolveDiskOptions(options: DiskTierOptions): ResolvedDiskOptions {
  const bytes = (name: ByteOptions): number | undefined => byteOption(options[name], name);
  const capacity = bytes('capacity') ?? Infinity;
  checkPositive('capacity', capacity, true);
  let parents: string[];
  if (options.directories !== undefined) {
    if (!Array.isArray(options.directories) || options.directories.length === 0) {
      throw new InvalidArgumentError('directories must be a non-empty array of paths');
    }
    parents = [...options.directories];
  } else {
    parents = [options.directory ?? os.tmpdir()];
  }
  for (const dir of parents) {
    if (typeof dir !== 'string' || dir === '') throw new InvalidArgumentError(`a directory must be a non-empty string, got ${String(dir)}`);
  }
  const compression = options.compression ?? 'none';
  if (!['lz4', 'none', 'auto'].includes(compression)) {
    throw new InvalidArgumentError(`compression must be 'lz4', 'none' or 'auto', got ${String(compression)}`);
  }
  const resolved: ResolvedDiskOptions = {
    parents,
    name: options.name ?? 'disk',
    capacity,
    compression,
    chunkBytes: bytes('chunkBytes') ?? DEFAULT_CHUNK_BYTES,
    smallValueBytes: bytes('smallValueBytes') ?? MiB,
    segmentBytes: bytes('segmentBytes') ?? 64 * MiB,
    compactDeadFraction: options.compactDeadFraction ?? 0.5,
    segmentLanes: options.segmentLanes ?? 2,
    directWrites: options.directWrites ?? true,
    readSliceBytes: bytes('readSliceBytes') ?? 8 * MiB,
    streamChunkBytes: bytes('streamChunkBytes') ?? MiB,
  };
  const { chunkBytes, smallValueBytes, segmentBytes, compactDeadFraction } = resolved;
  checkPositive('chunkBytes', chunkBytes);
  if (!Number.isInteger(chunkBytes) || chunkBytes > MAX_CHUNK_BYTES) {
    throw new InvalidArgumentError(`chunkBytes must be an integer of at most ${MAX_CHUNK_BYTES}, got ${chunkBytes}`);
  }
  checkNonNegativeInteger('smallValueBytes', smallValueBytes);
  checkPositive('segmentBytes', segmentBytes);
  if (smallValueBytes > segmentBytes) {
    throw new InvalidArgumentError(`smallValueBytes (${smallValueBytes}) must not exceed segmentBytes (${segmentBytes})`);
  }
  checkPositive('segmentLanes', resolved.segmentLanes);
  if (!Number.isInteger(resolved.segmentLanes) || resolved.segmentLanes > 16) {
    throw new InvalidArgumentError(`segmentLanes must be an integer from 1 to 16, got ${resolved.segmentLanes}`);
  }
  if (typeof resolved.directWrites !== 'boolean') throw new InvalidArgumentError(`directWrites must be true or false, got ${String(resolved.directWrites)}`);
  checkPositive('compactDeadFraction', compactDeadFraction);
  if (compactDeadFraction >= 1) throw new InvalidArgumentError(`compactDeadFraction must be below 1, got ${compactDeadFraction}`);
  // Byte counts reach fs calls as lengths and positions: a fraction there aborts the
  // process (readSliceBytes) or reads the wrong bytes (streamChunkBytes).
  for (const label of ['segmentBytes', 'readSliceBytes', 'streamChunkBytes'] as const) {
    checkPositive(label, resolved[label]);
    if (!Number.isSafeInteger(resolved[label])) throw new InvalidArgumentError(`${label} must be an integer, got ${resolved[label]}`);
  }
  return resolved;
}
