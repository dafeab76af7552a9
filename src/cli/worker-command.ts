import { once } from 'node:events';
import { availableParallelism } from 'node:os';
import { Supervisor } from '../client/supervisor.js';
import type { DataAddress } from '../cluster/protocol.js';
import { type LogLevel, createLogger } from '../log.js';
import { type MemoryLimitSpec, resolveMemoryLimit } from '../worker/memory-limit.js';
import { parseSupervisorRestarts } from '../worker/options.js';
import { Worker } from '../worker/index.js';
import { applyHeapGrowth, confineOldSpaceFloor } from '../runtime/tuned-environment.js';
import { EXIT_FAILED, announce, onParentGone, resolveLogLevel, resolveToken, runUntilStopped, startedByParent } from './options.js';
import { type SecurityFlags, tlsFromFlags } from './security-flags.js';

export interface WorkerFlags extends SecurityFlags {
  scheduler: DataAddress;
  memoryLimit: MemoryLimitSpec;
  target?: number | false;
  spill?: number | false;
  pause?: number | false;
  maxSpill?: number | false;
  nthreads?: number;
  threadNice?: number;
  localDirectory?: string;
  directWrites?: boolean;
  token?: string;
  host: string;
  port: number;
  contactAddress?: DataAddress;
  name?: string;
  httpPort?: number;
  connectTimeout: number;
  allowModules?: string;
  nworkers: number;
  terminate: number;
  retireTimeout: number;
  /** false with --no-supervisor: run the worker in this process. */
  supervisor: boolean;
  logLevel?: string;
}

/**
 * `spillway worker`: a supervisor process starting `--nworkers` worker processes (each this
 * command with `--no-supervisor`), or with `--no-supervisor` the worker itself.
 */
export async function workerCommand(flags: WorkerFlags): Promise<void> {
  const level = resolveLogLevel(flags.logLevel);
  if (flags.supervisor) await superviseWorkers(flags, level);
  else await runWorker(flags, level);
}

/**
 * One worker in this process, until stopped, or until it has lost the scheduler and cannot
 * reach it again within --connect-timeout. SIGTERM and SIGHUP retire it (its data goes to
 * other workers first, within --retire-timeout); SIGINT closes it at once. Announces
 * `{"event":"ready",...}`, then `{"event":"reconnected",...}` after each new registration.
 */
async function runWorker(flags: WorkerFlags, level: LogLevel): Promise<void> {
  // Before the worker allocates anything: its heap's growth, as its supervisor chose, and
  // its old-generation floor kept to this thread's heap, before any task thread starts.
  applyHeapGrowth();
  confineOldSpaceFloor();
  const worker = await Worker.start({
    scheduler: flags.scheduler,
    token: resolveToken(flags.token),
    tls: await tlsFromFlags(flags),
    insecure: flags.insecure === true,
    httpHost: flags.httpHost,
    httpToken: resolveToken(flags.httpToken),
    memoryLimit: flags.memoryLimit,
    target: flags.target,
    spill: flags.spill,
    pause: flags.pause,
    maxSpill: flags.maxSpill,
    nthreads: flags.nthreads,
    threadNice: flags.threadNice,
    localDirectory: flags.localDirectory,
    directWrites: flags.directWrites === true,
    host: flags.host,
    port: flags.port,
    contactAddress: flags.contactAddress,
    name: flags.name,
    httpPort: flags.httpPort,
    schedulerConnectTimeoutMs: flags.connectTimeout,
    workersOnHost: flags.nworkers,
    allowModules: flags.allowModules,
    retireTimeoutMs: flags.retireTimeout,
    supervisorRestarts: parseSupervisorRestarts(process.env.SPILLWAY_SUPERVISOR_RESTARTS),
    logger: createLogger('spillway-worker', level),
  });
  // Signal handlers before the announcements: a parent that signals as soon as it reads a
  // line must find them installed.
  // Retired on a client's request: an orderly end (exit 0), which a supervisor does not restart.
  worker.once('retired', () => {
    announce('closed', { reason: 'retired' });
    process.exit(0);
  });
  const lost = once(worker, 'close').then(() => (worker.retiring ? new Promise<never>(() => undefined) : undefined));
  runUntilStopped('worker', async (reason) => void (reason === 'SIGINT' || reason === 'parent gone' ? await worker.close() : await worker.retire()), lost);
  const { folders, bytes } = worker.reclaimed;
  if (folders.length > 0) announce('reclaimed', { folders: folders.map((f) => ({ path: f.path, bytes: f.bytes, pid: f.owner.pid })), bytes });
  announce('ready', { workerId: worker.workerId, name: worker.name, data: worker.address, httpAddress: worker.httpAddress ?? null, memoryLimit: worker.store.memoryLimit, pid: process.pid });
  worker.on('disconnected', (err?: Error) => announce('disconnected', { reason: err?.message ?? 'connection closed' }));
  worker.on('reconnected', (info: Record<string, unknown>) => announce('reconnected', info));
}

/**
 * Flags only the supervisor reads (the token goes to the workers in the environment;
 * --nworkers is given again, explicitly, as the number of workers sharing the host).
 */
const SUPERVISOR_FLAGS = new Set(['--nworkers', '--terminate', '--token', '--supervisor', '--no-supervisor']);

/**
 * The worker's own arguments: this command's, without the supervisor's flags, with a name
 * and ports of their own when there are several (commander takes an option's last value).
 */
function childArgs(flags: WorkerFlags, slot: number): string[] {
  const start = process.argv.indexOf('worker', 2);
  const args: string[] = [];
  const given = process.argv.slice(start + 1);
  for (let i = 0; i < given.length; i++) {
    const [name, inline] = given[i].split('=', 2);
    if (!SUPERVISOR_FLAGS.has(name)) args.push(given[i]);
    else if (inline === undefined && name !== '--supervisor' && name !== '--no-supervisor') i++; // its value too
  }
  // An unsupervised worker's --nworkers: how many share the host, which --memory-limit auto divides.
  args.push('--nworkers', String(flags.nworkers));
  if (flags.nworkers > 1) {
    if (flags.name !== undefined) args.push('--name', `${flags.name}-${slot}`);
    if (flags.port !== 0) args.push('--port', String(flags.port + slot));
    if (flags.httpPort !== undefined && flags.httpPort !== 0) args.push('--http-port', String(flags.httpPort + slot));
  }
  return args;
}

/**
 * The supervisor: starts the workers with the tuned C library settings (the user's own
 * variables win), restarts them, kills runaway ones, passes SIGTERM and SIGHUP on as
 * SIGTERM (each worker retires) and SIGINT as SIGINT, and exits once they have, with the
 * worst exit code among them. A second signal kills them at once.
 */
async function superviseWorkers(flags: WorkerFlags, level: LogLevel): Promise<void> {
  const log = createLogger('spillway-supervisor', level);
  const token = resolveToken(flags.token);
  // Each worker's limit, resolved here as the worker will resolve it ('auto' and fractions
  // share this host among --nworkers): the allocator's tuning and the runaway rule depend on it.
  const memoryLimit = await resolveMemoryLimit(flags.memoryLimit, { workersOnHost: flags.nworkers });
  const supervisor = new Supervisor({
    count: flags.nworkers,
    // The worker's own default, all the host's cores.
    taskThreads: flags.nthreads ?? availableParallelism(),
    args: (slot) => childArgs(flags, slot),
    // The token travels in the environment, never on a command line (visible in `ps`).
    env: { SPILLWAY_LOG_LEVEL: level, ...(token === undefined ? {} : { SPILLWAY_TOKEN: token }) },
    memoryLimit,
    terminate: flags.terminate,
    stderr: 'inherit',
    log,
    onEvent: (slot, event) => announce(String(event.event), { ...event, slot }),
  });
  let signals = 0;
  const stop = (reason: string, signal: NodeJS.Signals = 'SIGTERM'): void => {
    if (++signals > 1) {
      supervisor.signal('SIGKILL');
      process.exit(EXIT_FAILED);
    }
    log.info({ reason, workers: supervisor.workers.filter((w) => w.running).length }, 'stopping the workers');
    // They retire first (their data goes to peers), bounded by their --retire-timeout.
    void supervisor.stop(flags.retireTimeout + 30_000, signal);
  };
  process.on('SIGINT', () => stop('SIGINT', 'SIGINT'));
  for (const signal of ['SIGTERM', 'SIGHUP'] as const) process.on(signal, () => stop(signal));
  if (startedByParent()) onParentGone(() => stop('parent gone', 'SIGINT'));
  void supervisor.done.then((code) => {
    log.info({ code, restarts: supervisor.restarts, memoryKills: supervisor.memoryKills }, 'supervisor exiting');
    announce('closed', { restarts: supervisor.restarts, memoryKills: supervisor.memoryKills });
    process.exit(code);
  });
}
