import { SpillwayError } from '../errors.js';

/** The scheduler could not be reached within the connect timeout (not running, wrong address, no route). */
export class SchedulerUnreachableError extends SpillwayError {
  readonly address: string;
  constructor(address: string, timeoutMs: number, cause?: unknown) {
    const why = cause instanceof Error ? `; last attempt: ${cause.message}` : '';
    super('SPW_ERR_SCHEDULER_UNREACHABLE', `could not reach the scheduler at ${address} within ${timeoutMs} ms${why}`, { cause });
    this.address = address;
  }
}

/** A worker's advertised data address cannot be reached by its peers (loopback or unspecified, seen from another host). */
export class AddressError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_ADDRESS', message);
  }
}
