import type { ProgressParams } from '../cluster/protocol.js';

/**
 * Asks for the task counts every `intervalMs` (one request at a time) until stopped. One
 * failed request (a timeout on a busy scheduler: `ask` answers undefined) skips a report,
 * not the rest.
 */
export function pollProgress(intervalMs: number, ask: () => Promise<ProgressParams | undefined>, onCounts: (counts: ProgressParams) => void, ended: () => boolean): { stop(): void } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const tick = async (): Promise<void> => {
    const counts = await ask();
    if (stopped || ended()) return;
    if (counts !== undefined) onCounts(counts);
    timer = setTimeout(() => void tick(), intervalMs);
  };
  timer = setTimeout(() => void tick(), intervalMs);
  return {
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
