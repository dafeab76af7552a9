import { SpillwayError } from '../errors.js';

/**
 * A peer broke the scheduler's rules: it called a method before registering, or a method
 * of the other role (a client reporting a finished task). The channel is closed after it.
 * Codes: SPW_ERR_NOT_REGISTERED, SPW_ERR_WRONG_ROLE, SPW_ERR_ALREADY_REGISTERED.
 */
export class SchedulerProtocolError extends SpillwayError {
  constructor(code: 'SPW_ERR_NOT_REGISTERED' | 'SPW_ERR_WRONG_ROLE' | 'SPW_ERR_ALREADY_REGISTERED', message: string) {
    super(code, message);
  }
}

/** Code of the error a task gets when one of its inputs was lost and cannot be recomputed. */
export const LOST_INPUT_CODE = 'SPW_ERR_LOST_INPUT';
