import { SpillwayError } from '../errors.js';

/** A peer called a scheduler method before registering (or while the scheduler closes). The channel is closed after it. */
export class NotRegisteredError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_NOT_REGISTERED', message);
  }
}

/** A peer called a method of the other role (a client reporting a finished task). */
export class WrongRoleError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_WRONG_ROLE', message);
  }
}

/** A channel tried to register a second time. */
export class AlreadyRegisteredError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_ALREADY_REGISTERED', message);
  }
}

/** Code of the error a task gets when one of its inputs was lost and cannot be recomputed. */
export const LOST_INPUT_CODE = 'SPW_ERR_LOST_INPUT';
