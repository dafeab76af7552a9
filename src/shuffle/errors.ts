import { SpillwayError } from '../errors.js';

/** The user's split function failed its contract (not an array of exactly P pieces, not a function). */
export class ShuffleSplitError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_SHUFFLE_SPLIT', message);
  }
}

/**
 * An output's pieces are not all there exactly once (a worker was lost and the shuffle
 * restarted under it). The scheduler runs the output again once the restarted shuffle is
 * complete; a client sees this only if that keeps failing.
 */
export class ShuffleIncompleteError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_SHUFFLE_INCOMPLETE', message);
  }
}

/** A push carried an older run of the shuffle than the receiver's: the sender asks the scheduler for the current one. */
export class ShuffleStaleRunError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_SHUFFLE_STALE_RUN', message);
  }
}

/** The pieces of a shuffle could not be stored: the worker's disk is full (its store cannot spill). */
export class ShuffleDiskFullError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_SHUFFLE_DISK_FULL', message);
  }
}

/** Pushing pieces to a worker failed for longer than the shuffle waits for the scheduler to restart it. */
export class ShufflePushError extends SpillwayError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SPW_ERR_SHUFFLE_PUSH', message, options);
  }
}

/** A shuffle-get for a shuffle whose graph the scheduler no longer holds (released, failed or cancelled): its transfer stops. */
export class ShuffleOverError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_SHUFFLE_OVER', message);
  }
}
