import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidArgumentError } from '../errors.js';
import { TransferError, TransferTimeoutError } from '../transfer/errors.js';
import { Channel, type ChannelOptions } from './channel.js';
import { SchedulerUnreachableError } from './errors.js';

export interface RetryOptions {
  /** Keep trying for this long (ms). */
  timeoutMs: number;
  /** First wait between attempts, doubled each time up to maxDelayMs. Default 100 ms. */
  initialDelayMs?: number;
  /** Default 5 s. */
  maxDelayMs?: number;
  /** Stops the attempts early (the caller is closing). */
  signal?: AbortSignal;
}

/**
 * Connects a channel to the scheduler, retrying with backoff (and jitter) while it cannot be
 * reached (refused, no route, connect timeout) until `timeoutMs` has passed; then
 * SchedulerUnreachableError. A peer that answers and refuses (wrong token, a certificate
 * that does not verify, another protocol) fails at once: retrying would not change it.
 */
export async function connectWithRetry(address: { host: string; port: number }, options: ChannelOptions, retry: RetryOptions): Promise<Channel> {
  if (!(retry.timeoutMs >= 0)) throw new InvalidArgumentError(`connect timeout must be a non-negative number of ms, got ${retry.timeoutMs}`);
  const deadline = Date.now() + retry.timeoutMs;
  let delay = retry.initialDelayMs ?? 100;
  const maxDelay = retry.maxDelayMs ?? 5_000;
  for (;;) {
    const left = deadline - Date.now();
    let last: unknown;
    try {
      return await Channel.connect(address, { ...options, timeoutMs: Math.max(1, Math.min(options.timeoutMs ?? 10_000, left)) });
    } catch (err) {
      if (!retryable(err)) throw err;
      last = err;
    }
    const wait = Math.min(delay * (0.5 + Math.random() / 2), deadline - Date.now());
    if (wait <= 0 || retry.signal?.aborted === true) throw new SchedulerUnreachableError(`${address.host}:${address.port}`, retry.timeoutMs, last);
    await sleep(wait, undefined, { signal: retry.signal }).catch(() => undefined);
    delay = Math.min(maxDelay, delay * 2);
  }
}

/** Whether a failed attempt may succeed later: nothing answered, or the connection dropped before the handshake. */
function retryable(err: unknown): boolean {
  if (err instanceof TransferTimeoutError) return true;
  if (!(err instanceof TransferError)) return false;
  const code = (err.cause as NodeJS.ErrnoException | undefined)?.code;
  return code === undefined || ['ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'EAI_AGAIN', 'ENOTFOUND', 'EPIPE', 'ECONNABORTED'].includes(code);
}
