import { EventEmitter } from 'node:events';
import { InvalidArgumentError } from '../errors.js';
import { type Logger, silentLogger } from '../log.js';
import { oldSpaceFloorArguments, tunedEnvironment } from '../runtime/tuned-environment.js';
import { formatBytes, parseBytes } from '../units.js';
import { type RestartReason, formatSupervisorRestarts } from '../worker/options.js';
import { hostMemory } from '../worker/memory-limit.js';
import { CliProcess, ClusterProcessError } from './processes.js';
import { terminateThreshold } from './terminate-rule.js';

export interface SupervisorOptions {
  /** Worker processes. */
  count: number;
  /** `spillway worker` arguments of worker `slot` (the supervisor adds `--no-supervisor`). */
  args: (slot: number) => string[];
  /** Environment of the workers, over this process's own (an `undefined` value unsets a variable). */
  env?: NodeJS.ProcessEnv;
  /**
   * Start the workers with the C library's allocator tuned for large buffers (by `memoryLimit`), V8's young
   * generation capped, a floor under its old generation's limit, and its helper threads
   * sized to each worker's share of the cores (`tunedEnvironment`, `oldSpaceFloorArguments`,
   * docs/configuration.md); variables the environment already sets win. Default true.
   */
  tuneMalloc?: boolean;
  /** Task threads of each worker (their `--nthreads`), which with `count` sizes V8's helper threads. Default 1. */
  taskThreads?: number;
  /**
   * Each worker's memory limit (bytes or '4 GiB'), the base of `terminate` and of the
   * allocator's tuning (`mallocThresholds`). Without it the terminate rule uses the `memoryLimit`
   * each worker announces when ready, and the allocator is tuned as for a limit of at least
   * `REUSE_MIN_LIMIT` (runtime/tuned-environment.ts).
   */
  memoryLimit?: number | string;
  /**
   * A worker whose RSS passes its footprint at registration plus this fraction of twice its
   * limit (at most this fraction of its share of the host's or container's memory) is killed
   * (SIGKILL) and restarted; 0 turns it off. Default 0.95. See terminate-rule.ts.
   */
  terminate?: number;
  /** The memory the kernel lets this host's workers have together (bytes, or a string such as `'8 GiB'`): default the container's limit, else the host's memory. */
  hostMemory?: number | string;
  /** How often RSS is read (ms). Default 200. */
  memoryIntervalMs?: number;
  /** Restart workers that exit unexpectedly. Default true. */
  restart?: boolean;
  /** Delay before the first restart (ms), doubled for each quick failure in a row. Default 500. */
  restartDelayMs?: number;
  /** The longest delay between restarts (ms). Default 30 s. */
  maxRestartDelayMs?: number;
  /** Time for a worker to start and register (ms). Default 60 s. */
  startTimeoutMs?: number;
  stderr?: 'pipe' | 'inherit';
  log?: Logger;
  /** Every JSON line a worker prints on stdout (its announcements), with its slot. */
  onEvent?: (slot: number, event: Record<string, unknown>) => void;
}

/** One supervised worker: its current process and its history. */
export interface SupervisedWorker {
  readonly slot: number;
  /** The current process's pid (the last one, once it exited for good). */
  readonly pid: number;
  readonly running: boolean;
  /** Its announcement once registered: `{workerId, name, data, pid}`. */
  readonly ready: Record<string, unknown> | undefined;
  /** Times it was started again after an unexpected exit. */
  readonly restarts: number;
  /** Times it was killed for passing `terminate`. */
  readonly memoryKills: number;
  /** Its restarts by reason: `memory` after a kill for passing `terminate`, `exit` after any other unexpected exit. */
  readonly restartsBy: Readonly<Record<RestartReason, number>>;
  /** Resolves when the current process exits. */
  readonly exited: Promise<unknown>;
  /** The end of the current process's stderr (when piped). */
  readonly stderrTail: string;
  /** Peak and current RSS of the current process (Linux /proc), else undefined. */
  memory(): Promise<{ peakRss: number; rss: number } | undefined>;
}

/** A run of exits this close to their start counts as a crash loop. */
const QUICK_EXIT_MS = 30_000;
/** Quick exits in a row reported as a crash loop. */
const CRASH_LOOP = 5;
/** Exit code of a usage error (a bad flag, a wrong token): restarting cannot fix it. */
const EXIT_USAGE = 2;

class Slot implements SupervisedWorker {
  process!: CliProcess;
  startedAt = 0;
  quickExits = 0;
  readonly restartsBy: Record<RestartReason, number> = { exit: 0, memory: 0 };
  memoryKills = 0;
  killedForMemory = false;
  /** A read of this slot's RSS is in flight: the next tick skips the slot, so one kill is never counted twice. */
  checkingMemory = false;
  /** The RSS above which the current process is killed, once it registered and is policed (see #police), else 0. */
  killAbove = 0;
  /** Exited for good (on purpose, a usage error, or while stopping), with that exit code. */
  finalCode: number | undefined;
  timer: NodeJS.Timeout | undefined;
  constructor(readonly slot: number) {}
  get restarts(): number {
    return this.restartsBy.exit + this.restartsBy.memory;
  }
  get pid(): number {
    return this.process.pid;
  }
  get running(): boolean {
    return this.process.running;
  }
  get ready(): Record<string, unknown> | undefined {
    return this.process.event('ready');
  }
  get exited(): Promise<unknown> {
    return this.process.exited;
  }
  get stderrTail(): string {
    return this.process.stderrTail;
  }
  memory(): Promise<{ peakRss: number; rss: number } | undefined> {
    return this.process.memory();
  }
}

/**
 * Starts N `spillway worker` processes and looks after them, as Dask's nanny does: a worker
 * that exits unexpectedly is started again (after a delay that doubles while it keeps
 * failing soon after starting, reported as a crash loop rather than spun), and one whose
 * RSS passes its footprint at registration plus `terminate` × twice its limit (at most `terminate`
 * × its share of the host's memory; terminate-rule.ts) is killed before the kernel's OOM
 * killer picks a process itself. A worker that exits 0 (retired on purpose) or 2 (bad
 * arguments, wrong token) is not started again. Used by `spillway worker` and by LocalCluster.
 *
 * Events: 'ready' (worker), 'exit' (worker, {code, signal}), 'restart' (worker),
 * 'memory-kill' (worker, rss), 'done' (when every worker has exited for good).
 */
export class Supervisor extends EventEmitter {
  readonly #options: Required<Omit<SupervisorOptions, 'onEvent' | 'env' | 'memoryLimit' | 'tuneMalloc' | 'taskThreads' | 'hostMemory'>> & Pick<SupervisorOptions, 'onEvent'> & { memoryLimit: number | undefined };
  /** The workers' environment: the one place the tuned allocator settings are applied. */
  readonly #env: NodeJS.ProcessEnv;
  /** Node's own arguments for the workers (V8 flags the environment cannot carry). */
  readonly #nodeArgs: readonly string[];
  readonly #slots: Slot[];
  readonly #log: Logger;
  readonly #memoryTimer: NodeJS.Timeout | undefined;
  readonly done: Promise<number>;
  /** The kernel's ceiling for the workers together (see terminate-rule.ts), read once. */
  readonly #hostMemory: Promise<number>;
  #finish!: (code: number) => void;
  #stopping = false;

  constructor(options: SupervisorOptions) {
    super();
    const { count } = options;
    const memoryLimit = options.memoryLimit === undefined ? undefined : parseBytes(options.memoryLimit, 'memoryLimit');
    const terminate = options.terminate ?? 0.95;
    if (!Number.isInteger(count) || count < 1) throw new InvalidArgumentError(`count must be a positive integer, got ${count}`);
    const givenHostMemory = options.hostMemory === undefined ? undefined : parseBytes(options.hostMemory, 'hostMemory');
    if (givenHostMemory !== undefined && !(givenHostMemory > 0)) throw new InvalidArgumentError(`hostMemory must be a positive number of bytes, got ${givenHostMemory}`);
    if (memoryLimit !== undefined && !(memoryLimit > 0)) throw new InvalidArgumentError(`memoryLimit must be a positive number of bytes, got ${memoryLimit}`);
    const tuneMalloc = options.tuneMalloc ?? true;
    if (typeof tuneMalloc !== 'boolean') throw new InvalidArgumentError(`tuneMalloc must be a boolean, got ${String(tuneMalloc)}`);
    const taskThreads = options.taskThreads ?? 1;
    if (!Number.isInteger(taskThreads) || taskThreads < 1) throw new InvalidArgumentError(`taskThreads must be a positive integer, got ${taskThreads}`);
    if (!(terminate >= 0)) throw new InvalidArgumentError(`terminate must be a fraction of the memory limit (0 = off), got ${terminate}`);
    for (const name of ['memoryIntervalMs', 'restartDelayMs', 'maxRestartDelayMs', 'startTimeoutMs'] as const) {
      const value = options[name];
      if (value !== undefined && !(value > 0 && value <= 2 ** 31 - 1)) throw new InvalidArgumentError(`${name} must be a positive number of milliseconds, got ${value}`);
    }
    this.#options = {
      ...options,
      memoryLimit,
      terminate,
      memoryIntervalMs: options.memoryIntervalMs ?? 200,
      restart: options.restart ?? true,
      restartDelayMs: options.restartDelayMs ?? 500,
      maxRestartDelayMs: options.maxRestartDelayMs ?? 30_000,
      startTimeoutMs: options.startTimeoutMs ?? 60_000,
      stderr: options.stderr ?? 'inherit',
      log: options.log ?? silentLogger,
    };
    this.#log = this.#options.log;
    this.#hostMemory = givenHostMemory !== undefined ? Promise.resolve(givenHostMemory) : hostMemory().then((m) => m.bytes);
    const env = { ...process.env, ...options.env };
    this.#env = tuneMalloc ? tunedEnvironment(env, process.platform, { workers: count, taskThreads, memoryLimit }) : env;
    this.#nodeArgs = tuneMalloc ? oldSpaceFloorArguments(env, memoryLimit) : [];
    this.done = new Promise((resolve) => (this.#finish = resolve));
    this.#slots = Array.from({ length: count }, (_, i) => new Slot(i));
    for (const slot of this.#slots) this.#spawn(slot);
    if (terminate > 0) {
      this.#memoryTimer = setInterval(() => void this.#checkMemory(), this.#options.memoryIntervalMs);
      this.#memoryTimer.unref();
    }
  }

  /**
   * Starts the workers and waits until each has registered; stops them all if one cannot.
   * `created` gets the supervisor before that wait (to kill its processes on a signal).
   */
  static async start(options: SupervisorOptions, created?: (supervisor: Supervisor) => void): Promise<Supervisor> {
    const supervisor = new Supervisor({ ...options, restart: false });
    created?.(supervisor);
    try {
      await Promise.all(supervisor.#slots.map((slot) => slot.process.waitForEvent('ready', supervisor.#options.startTimeoutMs)));
    } catch (err) {
      await supervisor.stop(1_000);
      throw err;
    }
    // Restarting starts once every worker came up: a first start that fails is an error to report, not to retry.
    supervisor.#options.restart = options.restart ?? true;
    return supervisor;
  }

  get workers(): readonly SupervisedWorker[] {
    return this.#slots;
  }

  get restarts(): number {
    return this.#slots.reduce((sum, s) => sum + s.restarts, 0);
  }

  get memoryKills(): number {
    return this.#slots.reduce((sum, s) => sum + s.memoryKills, 0);
  }

  /** Sends `signal` to every running worker (SIGTERM: each retires, hands its data to peers, and exits). */
  signal(signal: NodeJS.Signals): void {
    for (const slot of this.#slots) if (slot.running) slot.process.child.kill(signal);
  }

  /** Sends `signal` to worker `slot` (a worker killed this way is restarted like any other). */
  kill(slot: number, signal: NodeJS.Signals = 'SIGKILL'): void {
    const target = this.#slots[slot];
    if (target === undefined) throw new InvalidArgumentError(`no worker ${slot} (there are ${this.#slots.length})`);
    if (target.running) target.process.child.kill(signal);
  }

  /** Waits until worker `slot` runs and has registered (after a restart, the new process). */
  async whenReady(slot: number, timeoutMs = this.#options.startTimeoutMs): Promise<Record<string, unknown>> {
    const target = this.#slots[slot];
    if (target === undefined) throw new InvalidArgumentError(`no worker ${slot} (there are ${this.#slots.length})`);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (target.finalCode !== undefined) throw new ClusterProcessError(`worker ${slot} exited for good (code ${target.finalCode})`);
      const ready = target.running ? target.ready : undefined;
      if (ready !== undefined) return ready;
      if (Date.now() > deadline) throw new ClusterProcessError(`worker ${slot} did not register within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** No more restarts; SIGTERM to every worker, SIGKILL to those still running after `graceMs`. */
  async stop(graceMs: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    this.#stopping = true;
    clearInterval(this.#memoryTimer);
    for (const slot of this.#slots) {
      clearTimeout(slot.timer);
      slot.timer = undefined;
      if (!slot.running) slot.finalCode ??= 0;
    }
    await Promise.all(
      this.#slots.map(async (slot) => {
        if (!slot.running) return;
        slot.process.child.kill(signal);
        const timer = setTimeout(() => slot.process.child.kill('SIGKILL'), graceMs);
        await slot.process.exited;
        clearTimeout(timer);
      }),
    );
    this.#checkDone();
  }

  #spawn(slot: Slot): void {
    // The worker reports its slot's restart counts in its metrics: they change only when it dies.
    const env = { ...this.#env, SPILLWAY_SUPERVISOR_RESTARTS: formatSupervisorRestarts(slot.restartsBy) };
    const child = new CliProcess(`worker ${slot.slot}`, ['worker', ...this.#options.args(slot.slot), '--no-supervisor'], env, this.#options.stderr, this.#nodeArgs);
    slot.process = child;
    slot.startedAt = Date.now();
    slot.killedForMemory = false;
    slot.killAbove = 0;
    child.onEvent = (event) => {
      this.#options.onEvent?.(slot.slot, event);
      if (event.event === 'ready') {
        this.#log.info({ slot: slot.slot, pid: child.pid, workerId: event.workerId, restarts: slot.restarts }, 'worker started');
        void this.#police(slot, child, typeof event.memoryLimit === 'number' ? event.memoryLimit : this.#options.memoryLimit);
        this.emit('ready', slot);
      }
    };
    void child.exited.then((exit) => this.#onExit(slot, child, exit));
  }

  #onExit(slot: Slot, child: CliProcess, exit: { code: number | null; signal: NodeJS.Signals | null }): void {
    if (slot.process !== child) return;
    this.emit('exit', slot, exit);
    const how = exit.signal ?? `code ${exit.code}`;
    const fields = { slot: slot.slot, pid: child.pid, exit: how, restarts: slot.restarts, memoryKills: slot.memoryKills };
    if (this.#stopping || exit.code === 0 || exit.code === EXIT_USAGE || !this.#options.restart) {
      slot.finalCode = exit.code ?? 1;
      if (!this.#stopping) {
        const log = exit.code === 0 ? this.#log.info.bind(this.#log) : this.#log.error.bind(this.#log);
        log({ ...fields, stderr: child.stderrTail.slice(-2000) || undefined }, exit.code === 0 ? 'worker exited on purpose; not restarted' : 'worker exited; not restarted');
      }
      this.#checkDone();
      return;
    }
    const uptime = Date.now() - slot.startedAt;
    slot.quickExits = uptime < QUICK_EXIT_MS ? slot.quickExits + 1 : 1;
    const delay = Math.min(this.#options.maxRestartDelayMs, this.#options.restartDelayMs * 2 ** (slot.quickExits - 1));
    const reason: RestartReason = slot.killedForMemory ? 'memory' : 'exit';
    if (slot.quickExits >= CRASH_LOOP) {
      this.#log.error({ ...fields, reason, quickExits: slot.quickExits, uptimeMs: uptime, delayMs: delay, stderr: child.stderrTail.slice(-2000) || undefined }, 'worker crash loop: it keeps exiting soon after starting');
    } else {
      this.#log.warn({ ...fields, reason, uptimeMs: uptime, delayMs: delay }, 'worker exited unexpectedly; restarting it');
    }
    slot.timer = setTimeout(() => {
      slot.timer = undefined;
      if (this.#stopping) return;
      slot.restartsBy[reason]++;
      this.#spawn(slot);
      this.emit('restart', slot);
    }, delay);
  }

  /**
   * Starts policing a registered worker's RSS against terminate-rule.ts, its footprint now
   * excused. A worker over its threshold already (its share of the host's memory is below
   * what the runtime itself takes) cannot be policed: killing it would only restart it
   * forever. That is logged once, and the worker is left alone.
   */
  async #police(slot: Slot, child: CliProcess, limit: number | undefined): Promise<void> {
    const { terminate } = this.#options;
    if (terminate === 0 || limit === undefined || !(limit > 0)) return;
    const [memory, ceiling] = await Promise.all([child.memory(), this.#hostMemory]);
    if (slot.process !== child || memory === undefined) return;
    const threshold = terminateThreshold({ footprint: memory.rss, limit, terminate, ceiling, workers: this.#slots.length });
    const fields = { slot: slot.slot, pid: child.pid, rss: memory.rss, limit, terminate, threshold, hostMemory: ceiling, workers: this.#slots.length };
    if (memory.rss >= threshold) {
      this.#log.warn(fields, `worker not policed for memory: its RSS at registration, ${formatBytes(memory.rss)}, is already above ${terminate} of its share of this host's ${formatBytes(ceiling)}`);
      return;
    }
    this.#log.debug(fields, `worker policed for memory: killed above ${formatBytes(threshold)}`);
    slot.killAbove = threshold;
  }

  async #checkMemory(): Promise<void> {
    await Promise.all(
      this.#slots.map(async (slot) => {
        const child = slot.process;
        const threshold = slot.killAbove;
        if (!child.running || threshold === 0 || slot.killedForMemory || slot.checkingMemory) return;
        slot.checkingMemory = true;
        const memory = await child.memory().finally(() => (slot.checkingMemory = false));
        if (memory === undefined || memory.rss <= threshold || slot.process !== child || !child.running || slot.killedForMemory || this.#stopping) return;
        slot.killedForMemory = true;
        slot.memoryKills++;
        child.child.kill('SIGKILL');
        this.#log.warn(
          { slot: slot.slot, pid: child.pid, rss: memory.rss, threshold, terminate: this.#options.terminate, memoryKills: slot.memoryKills },
          `worker killed: RSS ${formatBytes(memory.rss)} passed ${formatBytes(threshold)} (its footprint at registration plus ${this.#options.terminate} of twice its limit or of 256 MiB, or ${this.#options.terminate} of its share of the host's memory)`,
        );
        this.emit('memory-kill', slot, memory.rss);
      }),
    );
  }

  #checkDone(): void {
    if (this.#slots.some((slot) => slot.finalCode === undefined)) return;
    clearInterval(this.#memoryTimer);
    const codes = this.#slots.map((slot) => slot.finalCode ?? 0);
    this.#finish(codes.includes(EXIT_USAGE) ? EXIT_USAGE : Math.max(...codes));
    this.emit('done');
  }
}
