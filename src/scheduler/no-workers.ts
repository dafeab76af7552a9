import type { Engine } from './engine.js';
import type { Logger } from './log.js';

/**
 * Times how long ready tasks have had no open worker to run on (as Dask's
 * `no-workers-timeout`): past `timeoutMs` they fail with SPW_ERR_NO_WORKERS, so a client
 * hears why its computation cannot progress instead of waiting forever. 0 never fails them.
 */
export class NoWorkersWatch {
  readonly #engine: Engine;
  readonly #timeoutMs: number;
  readonly #log: Logger;
  #since: number | undefined;

  constructor(engine: Engine, timeoutMs: number, log: Logger) {
    this.#engine = engine;
    this.#timeoutMs = timeoutMs;
    this.#log = log;
  }

  check(now: number): void {
    if (this.#timeoutMs === 0 || this.#engine.hasOpenWorker() || this.#engine.tasks.count('ready') === 0) {
      this.#since = undefined;
      return;
    }
    if (this.#since === undefined) {
      this.#since = now;
      this.#log.warn({ ready: this.#engine.tasks.count('ready'), timeoutMs: this.#timeoutMs }, 'tasks are ready and no worker can run them');
      return;
    }
    const waitedMs = now - this.#since;
    if (waitedMs < this.#timeoutMs) return;
    this.#since = undefined;
    const failed = this.#engine.failForNoWorkers(waitedMs);
    this.#log.error({ tasks: failed, waitedMs }, 'no worker came to run the ready tasks; they fail with SPW_ERR_NO_WORKERS');
  }
}
