import {
  type Graph,
  Methods,
  type ProgressParams,
  type RetireWorkersResult,
  type SubmitParams,
  type SubmitResult,
  type UploadModuleParams,
  type UploadModuleResult,
  type WhoHasResult,
} from '../cluster/protocol.js';
import type { Channel } from '../control/channel.js';
import { GraphError } from '../errors.js';
import { ModuleRefusedError, UnknownModuleError } from '../shipping/errors.js';
import { RemoteError } from '../transfer/errors.js';

/** How long retireWorkers waits for the workers to leave (their own retire timeout bounds it first). */
const RETIRE_TIMEOUT_MS = 10 * 60_000;

/**
 * A client's requests to the scheduler, with the scheduler's refusals turned into the
 * client's errors. Submits and releases reach the scheduler one after another, in the
 * order they were asked for: a graph naming a future goes after the submit that made it,
 * a release after the graphs asked for before it.
 */
export class SchedulerCalls {
  readonly #channel: Channel;
  #order: Promise<unknown> = Promise.resolve();

  constructor(channel: Channel) {
    this.#channel = channel;
  }

  /** Runs `step` after every submit and release asked for before it. */
  inOrder<T>(step: () => Promise<T>): Promise<T> {
    const run = this.#order.then(step);
    this.#order = run.catch(() => undefined);
    return run;
  }

  /** Submits a graph; a module the scheduler dropped (beyond its cache limit) is uploaded again once. */
  async submit(params: SubmitParams, modules: { uploadAgain(graph: Graph): Promise<unknown> }, retried = false): Promise<SubmitResult> {
    try {
      return await this.#channel.request<SubmitResult>(Methods.submit, params);
    } catch (err) {
      if (err instanceof RemoteError && err.remoteCode === 'SPW_ERR_MODULE_UNKNOWN' && !retried) {
        await modules.uploadAgain(params.graph);
        return this.submit(params, modules, true);
      }
      if (err instanceof RemoteError && err.remoteCode === 'SPW_ERR_MODULE_UNKNOWN') {
        throw new UnknownModuleError(err.message.replace(/^peer error SPW_ERR_MODULE_UNKNOWN: /, ''));
      }
      if (err instanceof RemoteError && err.remoteCode === 'SPW_ERR_GRAPH') {
        throw new GraphError(err.message.replace(/^peer error SPW_ERR_GRAPH: /, ''));
      }
      throw err;
    }
  }

  release(keys: string[]): Promise<unknown> {
    return this.#channel.request(Methods.release, { keys });
  }

  async uploadModule(params: UploadModuleParams): Promise<UploadModuleResult> {
    try {
      return await this.#channel.request<UploadModuleResult>(Methods.uploadModule, params);
    } catch (err) {
      if (err instanceof RemoteError && err.remoteCode === 'SPW_ERR_MODULE_REFUSED') {
        throw new ModuleRefusedError(params.url, err.message.replace(/^peer error SPW_ERR_MODULE_REFUSED: /, ''));
      }
      throw err;
    }
  }

  /** The scheduler's count of this client's tasks; undefined if it could not answer. */
  async progress(): Promise<ProgressParams | undefined> {
    try {
      return await this.#channel.request<ProgressParams>(Methods.progress, {}, 30_000);
    } catch {
      return undefined; // a lost scheduler fails the computation on its own path
    }
  }

  whoHas(keys: readonly string[]): Promise<WhoHasResult> {
    return this.#channel.request<WhoHasResult>(Methods.whoHas, { keys: [...keys] }, 30_000);
  }

  async retireWorkers(workers: readonly string[]): Promise<string[]> {
    const answer = await this.#channel.request<RetireWorkersResult>(Methods.retireWorkers, { workers: [...workers] }, RETIRE_TIMEOUT_MS);
    return answer.retired;
  }
}
