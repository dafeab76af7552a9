/**
 * What SpillStore's calls take beside keys and values: the options of `set` and `acquire`,
 * and the check that a key is a string.
 */
import { InvalidArgumentError } from '../errors.js';

export interface SetOptions {
  /** In-memory size (bytes, or a string like '3 MiB'), when you know it better than the estimate. */
  size?: number | string;
  /**
   * Not needed again soon (as a shuffle's received pieces): it goes to the cold end of the
   * memory LRU, so that spilling writes it before the values in use. A read warms it.
   */
  cold?: boolean;
  /**
   * The store is the value's only holder: nothing else keeps a reference to it or to views
   * of its buffers. Its ArrayBuffers (of 64 KiB or more, through arrays, plain objects, Maps
   * and Sets) are then freed as soon as the store lets go of the value (spilled, deleted,
   * overwritten) instead of when V8 next collects, which keeps RSS close to what the store
   * holds and spares the collections the dead buffers would start. `get`, `peek`,
   * `createReadStream` from memory and a lease that is not `transient` hand the value out,
   * and it is then left to the collector like any other.
   */
  owned?: boolean;
}

export interface AcquireOptions {
  /**
   * The holder keeps no reference to the values, nor to views of their memory, once it
   * releases the lease (it copies what it needs): values set with `owned` stay owned.
   */
  transient?: boolean;
}

export function assertKey(key: unknown): asserts key is string {
  if (typeof key !== 'string') throw keyError(key);
}

export function keyError(key: unknown): InvalidArgumentError {
  return new InvalidArgumentError(`keys are strings, got ${key === null ? 'null' : typeof key}`);
}
