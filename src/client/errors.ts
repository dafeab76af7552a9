import { SpillwayError } from '../errors.js';

/** The client's connection to the scheduler was lost; computations in flight cannot finish. */
export class SchedulerLostError extends SpillwayError {
  constructor(address: string, cause?: unknown) {
    const why = cause instanceof Error ? `: ${cause.message}` : '';
    super('SPW_ERR_SCHEDULER_LOST', `lost the connection to the scheduler at ${address}${why}`, { cause });
  }
}

/** None of a result's holders could deliver it, even after asking the scheduler again. */
export class ResultUnavailableError extends SpillwayError {
  readonly key: string;
  constructor(key: string, cause?: unknown) {
    const why = cause instanceof Error ? `: ${cause.message}` : '';
    super('SPW_ERR_RESULT_UNAVAILABLE', `could not fetch the result ${JSON.stringify(key)} from any worker${why}`, { cause });
    this.key = key;
  }
}

/** A future was used (its result, or as an argument of another task) after it was released or cancelled. */
export class FutureReleasedError extends SpillwayError {
  readonly key: string;
  readonly reason: 'released' | 'cancelled';
  constructor(key: string, reason: 'released' | 'cancelled') {
    super('SPW_ERR_FUTURE_RELEASED', `the future of ${JSON.stringify(key)} was ${reason}: its result is no longer held for this client (keep the future until its last use)`);
    this.key = key;
    this.reason = reason;
  }
}
