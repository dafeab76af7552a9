import type { ClusterState } from '../cluster/protocol.js';
import { SpillwayError } from '../errors.js';

/** GET /api/state did not answer with a ClusterState. */
export class StateUnavailableError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_STATE_UNAVAILABLE', message);
  }
}

/** Reads the scheduler's `GET /api/state` (`base` is `http://host:port`). */
export async function fetchClusterState(base: string, timeoutMs = 5_000): Promise<ClusterState> {
  const response = await fetch(`${base}/api/state`, { signal: AbortSignal.timeout(timeoutMs) });
  if (!response.ok) throw new StateUnavailableError(`GET ${base}/api/state answered ${response.status}`);
  const body = (await response.json()) as Partial<ClusterState> | null;
  if (body === null || typeof body !== 'object' || !Array.isArray(body.workers)) {
    throw new StateUnavailableError(`GET ${base}/api/state has no workers[]`);
  }
  return body as ClusterState;
}
